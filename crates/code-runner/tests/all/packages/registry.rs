//! A real npm registry on loopback for what the public one cannot be made
//! to serve on demand: a package with an install script, one with a native
//! addon, one whose tarball does not match its published integrity, one
//! that does not exist, and small good ones for `install`. Tarballs are made
//! with the system's `tar`, packuments are npm's format; the real `npm`
//! resolves, fetches and checks them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha512};

/// One package the registry serves at version 1.0.0: its files (path → text).
struct Fixture {
    name: &'static str,
    files: Vec<(&'static str, String)>,
    /// Publish an integrity for other bytes than the tarball's.
    wrong_integrity: bool,
}

fn fixtures() -> Vec<Fixture> {
    let manifest = |name: &str, extra: Value| {
        let mut base = json!({"name": name, "version": "1.0.0", "main": "index.js"});
        for (key, value) in extra.as_object().unwrap() {
            base[key] = value.clone();
        }
        base.to_string()
    };
    vec![
        Fixture {
            name: "cr-fixture-script",
            files: vec![
                (
                    "package.json",
                    manifest(
                        "cr-fixture-script",
                        json!({"scripts": {"postinstall": "node -e \"require('fs').writeFileSync('pwned', '')\""}}),
                    ),
                ),
                ("index.js", "module.exports = 1;\n".into()),
            ],
            wrong_integrity: false,
        },
        Fixture {
            name: "cr-fixture-addon",
            files: vec![
                ("package.json", manifest("cr-fixture-addon", json!({}))),
                ("index.js", "module.exports = require('./build/Release/addon.node');\n".into()),
                ("build/Release/addon.node", "\u{7f}ELF not really\n".into()),
            ],
            wrong_integrity: false,
        },
        Fixture {
            name: "cr-fixture-integrity",
            files: vec![
                ("package.json", manifest("cr-fixture-integrity", json!({}))),
                ("index.js", "module.exports = 1;\n".into()),
            ],
            wrong_integrity: true,
        },
        Fixture {
            name: "cr-fixture-greet",
            files: vec![
                (
                    "package.json",
                    manifest(
                        "cr-fixture-greet",
                        json!({"type": "module", "exports": {".": "./index.js", "./loud": "./loud.js"}, "dependencies": {"cr-fixture-words": "^1.0.0"}}),
                    ),
                ),
                (
                    "index.js",
                    "import { word } from 'cr-fixture-words';\nexport const greet = (n) => `${word} ${n}`;\nexport default greet;\n".into(),
                ),
                (
                    "loud.js",
                    "import { greet } from './index.js';\nexport const shout = (n) => greet(n).toUpperCase() + '!';\n".into(),
                ),
            ],
            wrong_integrity: false,
        },
        Fixture {
            name: "cr-fixture-words",
            files: vec![
                ("package.json", manifest("cr-fixture-words", json!({"type": "module", "exports": "./index.js"}))),
                ("index.js", "export const word = 'hello';\n".into()),
            ],
            wrong_integrity: false,
        },
        Fixture {
            name: "cr-fixture-cjs",
            files: vec![
                ("package.json", manifest("cr-fixture-cjs", json!({}))),
                (
                    "index.js",
                    "exports.twice = (x) => x * 2;\nexports.name = 'cjs';\n".into(),
                ),
            ],
            wrong_integrity: false,
        },
    ]
}

/// `tar czf` of `files` under `package/`.
fn tarball(dir: &Path, fixture: &Fixture) -> Vec<u8> {
    let root = dir.join(fixture.name);
    for (path, text) in &fixture.files {
        let file = root.join("package").join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let out = dir.join(format!("{}.tgz", fixture.name));
    let status = std::process::Command::new("tar")
        .args(["czf"])
        .arg(&out)
        .arg("-C")
        .arg(&root)
        .arg("package")
        .status()
        .expect("tar runs");
    assert!(status.success());
    std::fs::read(out).unwrap()
}

fn integrity(bytes: &[u8]) -> String {
    let digest = Sha512::digest(bytes);
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

struct Served {
    packuments: HashMap<String, Value>,
    tarballs: HashMap<String, Vec<u8>>,
}

/// The registry, serving until the test process ends.
pub struct Registry {
    /// Its base URL, `http://127.0.0.1:<port>/`.
    pub url: String,
    serving: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts the registry on a loopback port.
    pub async fn start() -> Registry {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}/");
        let dir = crate::helpers::tempdir();
        let mut served = Served {
            packuments: HashMap::new(),
            tarballs: HashMap::new(),
        };
        for fixture in fixtures() {
            let bytes = tarball(dir.path(), &fixture);
            let published = match fixture.wrong_integrity {
                true => integrity(b"other bytes"),
                false => integrity(&bytes),
            };
            let manifest: Value = serde_json::from_str(&fixture.files[0].1).unwrap();
            let mut version = manifest.clone();
            if manifest.get("scripts").is_some() {
                version["hasInstallScript"] = json!(true);
            }
            version["dist"] = json!({
                "tarball": format!("{url}{}/-/{}-1.0.0.tgz", fixture.name, fixture.name),
                "integrity": published,
            });
            served.packuments.insert(
                fixture.name.to_string(),
                json!({
                    "name": fixture.name,
                    "dist-tags": {"latest": "1.0.0"},
                    "versions": {"1.0.0": version},
                }),
            );
            served
                .tarballs
                .insert(format!("{}-1.0.0.tgz", fixture.name), bytes);
        }
        let app = axum::Router::new()
            .route("/{name}", axum::routing::get(packument))
            .route("/{name}/-/{file}", axum::routing::get(tarball_of))
            .with_state(Arc::new(served));
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Registry {
            url,
            serving,
            _dir: dir,
        }
    }

    /// Stops serving: from now on its port refuses connections.
    pub async fn stop(&self) {
        self.serving.abort();
        let addr = self
            .url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        crate::helpers::wait_until(
            "the registry stops",
            std::time::Duration::from_secs(10),
            || std::net::TcpStream::connect(&addr).is_err(),
        )
        .await;
    }
}

async fn packument(State(served): State<Arc<Served>>, UrlPath(name): UrlPath<String>) -> Response {
    match served.packuments.get(&name) {
        Some(doc) => axum::Json(doc.clone()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "Not found"})),
        )
            .into_response(),
    }
}

async fn tarball_of(
    State(served): State<Arc<Served>>,
    UrlPath((_, file)): UrlPath<(String, String)>,
) -> Response {
    match served.tarballs.get(&file) {
        Some(bytes) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
