//! `--node-packages`: what the operator's npm packages cost (issue 46).
//! The set-up of the five-package list in a fresh cache (npm,
//! esbuild's own install, the bundle: what a cold machine's first start of
//! the list takes), each package's bundle size (its entry and the chunks it
//! reaches), and the CPU of a one-shot that imports it: the first in the
//! process (compiled; V8's code cache made) and later ones (the code cache
//! consumed), each against a one-shot that imports nothing, measured side by
//! side in one worker.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use code_runner::{Worker, WorkerOptions};
use code_runner_core::Config;
use serde_json::{Value, json};

/// The list.
const LIST: [&str; 5] = [
    "lodash-es@4.17.21",
    "date-fns@4",
    "zod@3",
    "papaparse@5",
    "mathjs@14",
];

/// Measures and prints the figures; answers them as JSON.
///
/// # Errors
/// The list cannot be installed, or the worker cannot start.
pub async fn measure(samples: usize, scratch: &Path) -> anyhow::Result<Value> {
    let specs: Vec<String> = LIST.iter().map(|s| s.to_string()).collect();
    let fresh = scratch.join("fresh-cache");
    let started = Instant::now();
    let installed = {
        let specs = specs.clone();
        let fresh = fresh.clone();
        tokio::task::spawn_blocking(move || {
            let request = code_runner_v8::packages::Request {
                specs: &specs,
                registry: None,
                what: "node_packages",
            };
            code_runner_v8::packages::install_in(&request, &fresh)
        })
        .await?
        .map_err(anyhow::Error::msg)?
    };
    let setup_s = started.elapsed().as_secs_f64();
    let sizes = bundle_sizes(&installed)?;
    let worker = Worker::start(WorkerOptions {
        data_dir: scratch.join("packages-worker"),
        config: Config {
            node_packages: specs,
            ..Config::default()
        },
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let cpu = |code: String| {
        let worker = worker.clone();
        async move {
            let answer = worker
                .call("code-runner::run", json!({"lang": "node", "code": code}))
                .await
                .map_err(|err| anyhow::anyhow!(err.message))?;
            if answer["exit_code"] != 0 {
                anyhow::bail!("{}", answer["stderr"]);
            }
            Ok::<f64, anyhow::Error>(answer["usage"]["cpu_ms"].as_f64().unwrap_or(f64::NAN))
        }
    };
    let mut baseline = Vec::new();
    for _ in 0..samples {
        baseline.push(cpu("return 1".into()).await?);
    }
    let baseline = median(&mut baseline);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "node_packages: set-up of {} in a fresh cache {setup_s:.1} s; a one-shot importing nothing {baseline:.2} ms CPU",
        LIST.join(" ")
    )?;
    writeln!(
        out,
        "{:<20} {:>10} {:>12} {:>8} {:>12} {:>8}",
        "package", "bundle KiB", "first ms", "× bare", "warm ms", "× bare"
    )?;
    drop(out);
    let mut rows = Vec::new();
    for spec in LIST {
        let name = code_runner_v8::packages::split_spec(spec).0;
        let code = format!("const m = await import('{name}');\nreturn Object.keys(m).length");
        let first = cpu(code.clone()).await?;
        let mut warm = Vec::new();
        for _ in 0..samples {
            warm.push(cpu(code.clone()).await?);
        }
        let warm = median(&mut warm);
        let kib = sizes.get(name).copied().unwrap_or(0) as f64 / 1024.0;
        writeln!(
            std::io::stdout().lock(),
            "{name:<20} {kib:>10.0} {first:>12.2} {:>8.1} {warm:>12.2} {:>8.1}",
            first / baseline,
            warm / baseline
        )?;
        rows.push(json!({
            "package": name, "bundle_bytes": sizes.get(name), "first_cpu_ms": first,
            "warm_cpu_ms": warm, "first_over_bare": first / baseline, "warm_over_bare": warm / baseline,
        }));
    }
    worker.shutdown().await;
    Ok(json!({
        "list": LIST, "setup_fresh_cache_s": setup_s, "bare_one_shot_cpu_ms": baseline,
        "samples": samples, "packages": rows,
    }))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Each listed package's bytes: its root entry and every chunk it reaches.
fn bundle_sizes(dir: &Path) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let map: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("map.json"))?)?;
    let files = dir.join("files");
    let mut sizes = std::collections::BTreeMap::new();
    for spec in LIST {
        let name = code_runner_v8::packages::split_spec(spec).0;
        let Some(entry) = map["modules"][name].as_str() else {
            continue;
        };
        let mut seen = BTreeSet::new();
        let mut stack = vec![entry.to_string()];
        let mut bytes = 0;
        while let Some(file) = stack.pop() {
            if !seen.insert(file.clone()) {
                continue;
            }
            let text = std::fs::read_to_string(files.join(&file))?;
            bytes += text.len() as u64;
            for part in text.split("\"./").skip(1) {
                if let Some(end) = part.find('"') {
                    let chunk = &part[..end];
                    if chunk.ends_with(".js") && !chunk.contains('/') {
                        stack.push(chunk.to_string());
                    }
                }
            }
        }
        sizes.insert(name.to_string(), bytes);
    }
    Ok(sizes)
}
