//! `node_packages`: npm packages the operator lists, resolved by the real
//! `npm` into a lock with integrity, bundled by esbuild at start and
//! importable in every JavaScript and TypeScript runtime. The five packages
//! agents import most come from the public registry (without it these tests
//! fail, they never skip); the refusals come from [`super::registry`], a
//! real registry on loopback that serves what the public one cannot be made
//! to on demand.

use std::time::Duration;

use serde_json::{Value, json};

use super::registry::Registry;
use crate::helpers::Server;

/// The five packages of the issue, as an operator would list them.
pub const FIVE: &str = "node_packages: [\"lodash-es@4.17.21\", \"date-fns@4\", \"zod@3\", \"papaparse@5\", \"mathjs@14\"]\n";

/// One program using all five (zod's object parsing runs its `new Function`
/// probe, which V8 here refuses and zod survives).
pub const SMOKE: &str = r#"import _ from 'lodash-es';
import { chunk, groupBy } from 'lodash-es';
import { format, addDays, differenceInCalendarDays } from 'date-fns';
import { z } from 'zod';
import Papa from 'papaparse';
import { evaluate, matrix, det, round } from 'mathjs';
const schema = z.object({ name: z.string(), age: z.number().int().min(0) });
const good = schema.safeParse({ name: 'a', age: 3 });
const bad = schema.safeParse({ name: 'a', age: -1 });
const csv = Papa.parse("a,b\n1,2\n3,4", { header: true, dynamicTyping: true });
return {
  chunk: chunk([1, 2, 3, 4, 5], 2), sum: _.sum([1, 2, 3]),
  groups: groupBy([1.5, 2.1, 1.2], Math.floor),
  date: format(addDays(new Date(2024, 0, 30), 3), 'yyyy-MM-dd'),
  days: differenceInCalendarDays(new Date(2024, 11, 25), new Date(2024, 0, 1)),
  good: good.success, bad: bad.error.issues[0].message,
  csv: csv.data, unparsed: Papa.unparse([{ x: 1, y: 'q' }]),
  math: evaluate('sqrt(16) + 2^3'), det: det(matrix([[1, 2], [3, 4]])),
  units: evaluate('5 cm to inch').toString(), rounded: round(Math.PI, 3),
};"#;

/// Waits until `/healthz` says node is no longer preparing (its packages
/// install at the first start of a list: npm, then esbuild).
pub async fn node_settled(server: &Server) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        let health = server.get("/healthz").await;
        last = health.body["engines"].clone();
        if !last["node"].as_str().unwrap_or("").starts_with("preparing") {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("node still preparing after 300 s: {last}");
}

/// What node 20 itself answers for `program` (an async function body with
/// imports), with the same five packages installed by npm.
fn node_answers(program: &str) -> Value {
    let dir = crate::helpers::tempdir();
    let manifest = json!({"private": true, "dependencies": {
        "lodash-es": "4.17.21", "date-fns": "4", "zod": "3", "papaparse": "5", "mathjs": "14"}});
    std::fs::write(dir.path().join("package.json"), manifest.to_string()).unwrap();
    let npm = std::process::Command::new("npm")
        .args(["install", "--ignore-scripts", "--no-audit", "--no-fund"])
        .current_dir(dir.path())
        .output()
        .expect("npm runs");
    assert!(
        npm.status.success(),
        "{}",
        String::from_utf8_lossy(&npm.stderr)
    );
    let (imports, body): (Vec<&str>, Vec<&str>) = program
        .lines()
        .partition(|line| line.starts_with("import "));
    let script = format!(
        "{}\nconst result = await (async () => {{\n{}\n}})();\nconsole.log(JSON.stringify(result));\n",
        imports.join("\n"),
        body.join("\n")
    );
    let file = dir.path().join("smoke.mjs");
    std::fs::write(&file, script).unwrap();
    let out = std::process::Command::new("node")
        .arg(&file)
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stderr_of(answer: &crate::helpers::Answer) -> String {
    answer.ok()["stderr"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The five packages give what node 20 gives, in a one-shot; TypeScript
/// imports them too (type-only imports dropped, subpath exports, dynamic
/// imports); a kept runtime keeps what it imported; `/healthz` names them
/// with their versions; an unknown package and a Node module not provided
/// are clear errors naming what there is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_five_packages_give_what_node_gives() {
    let server = Server::with_config(FIVE).await;
    let engines = node_settled(&server).await;
    assert_eq!(engines["node"], "ready", "{engines}");
    let listed = engines["node_packages"].to_string();
    for name in [
        "lodash-es@4.17.21",
        "date-fns@4.",
        "zod@3.",
        "papaparse@5.",
        "mathjs@14.",
    ] {
        assert!(listed.contains(name), "{name}: {listed}");
    }
    // Guests see what they can use: describe and the run tool name them.
    let described = server
        .call("code-runner::describe", json!({"lang": "typescript"}))
        .await;
    let javascript = described.ok()["packages"]["javascript"].to_string();
    assert!(javascript.contains("zod@3."), "{}", described.body);
    let mut session = crate::mcp_tools::client::Session::open(&server.url).await;
    let tools = serde_json::to_string(&session.tools().await).unwrap();
    assert!(tools.contains("npm packages lodash-es@4.17.21"), "{tools}");
    session.close().await;
    let expected = tokio::task::spawn_blocking(|| node_answers(SMOKE))
        .await
        .unwrap();
    let answer = server.run_in("node", SMOKE).await;
    assert_eq!(answer.ok()["result"], expected, "{}", answer.body);
    assert_eq!(answer.ok()["stderr"], "", "{}", answer.body);

    let typescript = "import type { ZodType } from 'zod';\nimport { z } from 'zod';\nimport { addDays } from 'date-fns/addDays';\nconst s: ZodType<string> = z.string().email();\nconst fp = await import('lodash-es');\nreturn [s.safeParse('a@b.co').success, addDays(new Date(0), 1).getTime(), fp.kebabCase('Hello World')];";
    let answer = server.run_in("typescript", typescript).await;
    assert_eq!(
        answer.ok()["result"],
        json!([true, 86_400_000, "hello-world"]),
        "{}",
        answer.body
    );

    let id = server
        .keep_in(
            "node",
            "import { z } from 'zod';\nglobalThis.schema = z.array(z.number());\nreturn 1",
        )
        .await;
    let answer = server
        .run_on(&id, "const { z } = await import('zod');\nreturn [schema.safeParse([1, 2]).success, schema instanceof z.ZodArray]")
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!([true, true]),
        "{}",
        answer.body
    );
    server.teardown(&id).await.ok();

    let answer = server
        .run_in("node", "import x from 'zodd';\nreturn 1")
        .await;
    let stderr = stderr_of(&answer);
    assert!(stderr.contains("cannot import \"zodd\""), "{stderr}");
    assert!(stderr.contains("zod@3."), "{stderr}");
    let answer = server
        .run_in("node", "import fs from 'node:fs';\nreturn 1")
        .await;
    let stderr = stderr_of(&answer);
    assert!(stderr.contains("cannot import \"node:fs\""), "{stderr}");
    assert!(
        stderr.contains("node:buffer, node:events, node:path"),
        "{stderr}"
    );
}

/// The small Node surface: Buffer, EventEmitter, path, util and process,
/// with and without `node:`, in a worker with no packages at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_surface_works_without_packages() {
    let server = Server::start().await;
    let code = "import { Buffer } from 'node:buffer';\nimport { EventEmitter } from 'events';\nimport path from 'node:path';\nimport { format, promisify } from 'node:util';\nimport process from 'node:process';\n\
        const seen = []; const e = new EventEmitter(); e.once('x', (v) => seen.push(v)); e.emit('x', 1); e.emit('x', 2);\n\
        const later = await promisify((v, cb) => cb(null, v * 2))(21);\n\
        await new Promise((resolve) => process.nextTick(resolve));\n\
        return [Buffer.from('héllo').toString('base64'), Buffer.from('aGk=', 'base64').toString(), Buffer.from([1, 255]).toString('hex'),\n\
          seen, path.join('/a/b', '../c', 'd.txt'), path.extname('x.tar.gz'), path.relative('/a/b', '/a/c/d'), format('%s=%d', 'n', 5), later, typeof process.env];";
    let answer = server.run_in("node", code).await;
    assert_eq!(
        answer.ok()["result"],
        json!([
            "aMOpbGxv",
            "hi",
            "01ff",
            [1],
            "/a/c/d.txt",
            ".gz",
            "../c/d",
            "n=5",
            42,
            "object"
        ]),
        "{}",
        answer.body
    );
    // Node's globals, made on first use: Buffer, process (stdout.write
    // prints as it is), global.
    let code = "process.stdout.write('a'); process.stdout.write('b\\n');\nreturn [Buffer.from('hi').length, global === globalThis, typeof process.nextTick, Object.keys(globalThis).includes('Buffer')]";
    let answer = server.run_in("node", code).await;
    assert_eq!(
        answer.ok()["result"],
        json!([2, true, "function", false]),
        "{}",
        answer.body
    );
    assert_eq!(answer.ok()["stdout"], "ab\n", "{}", answer.body);
    let answer = server
        .run_in("node", "import x from 'lodash';\nreturn 1")
        .await;
    let stderr = stderr_of(&answer);
    assert!(stderr.contains("provides no npm packages"), "{stderr}");
}

/// With `isolation: process` the sandbox processes import the install the
/// worker made (they never run npm).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_processes_import_the_node_packages() {
    let server = Server::process(&format!("isolation: process\n{FIVE}")).await;
    node_settled(&server).await;
    let answer = server
        .run_in("node", "import { z } from 'zod';\nimport { chunk } from 'lodash-es';\nreturn [z.string().parse('x'), chunk([1, 2, 3], 2)]")
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!(["x", [[1, 2], [3]]]),
        "{}",
        answer.body
    );
}

/// A package with an install script, one with a native addon, one whose
/// tarball does not match its integrity and one the registry does not have:
/// each leaves node unavailable at start with a message naming it and why
/// (`/healthz` and every node run say it), python still serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_packages_are_named_with_why() {
    let registry = Registry::start().await;
    let cases = [
        (
            "cr-fixture-script@1",
            "cr-fixture-script@1.0.0 has an install script",
        ),
        (
            "cr-fixture-addon@1",
            "cr-fixture-addon has a native addon (addon.node)",
        ),
        ("cr-fixture-integrity@1", "integrity"),
        ("cr-fixture-missing@1", "not in the registry"),
    ];
    for (spec, said) in cases {
        let yaml = format!(
            "npm_registry: \"{}\"\nnode_packages: [\"{spec}\"]\n",
            registry.url
        );
        let server = Server::with_config(&yaml).await;
        let engines = node_settled(&server).await;
        let node = engines["node"].as_str().unwrap_or_default();
        assert!(
            node.starts_with("unavailable: node_packages: "),
            "{spec}: {node}"
        );
        assert!(node.contains(said), "{spec}: {node}");
        let answer = server.run_in("node", "return 1").await;
        answer.assert_error("code-runner::engine", said);
        let answer = server.run_in("typescript", "return 1").await;
        answer.assert_error("code-runner::engine", said);
    }
}

/// A list whose install is in the cache starts again with no registry at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_list_needs_no_registry() {
    let registry = Registry::start().await;
    let yaml = format!(
        "npm_registry: \"{}\"\nnode_packages: [\"cr-fixture-greet@1\", \"cr-fixture-cjs@1\"]\n",
        registry.url
    );
    let server = Server::with_config(&yaml).await;
    node_settled(&server).await;
    let program = "import greet, { greet as named } from 'cr-fixture-greet';\nimport { shout } from 'cr-fixture-greet/loud';\nimport cjs, { twice } from 'cr-fixture-cjs';\nreturn [greet('a'), named('b'), shout('c'), twice(4), cjs.name]";
    let expected = json!(["hello a", "hello b", "HELLO C!", 8, "cjs"]);
    let answer = server.run_in("node", program).await;
    assert_eq!(answer.ok()["result"], expected, "{}", answer.body);
    drop(server);
    // The same list, the registry's address unchanged but nothing listening.
    registry.stop().await;
    let server = Server::with_config(&yaml).await;
    node_settled(&server).await;
    let answer = server.run_in("node", program).await;
    assert_eq!(answer.ok()["result"], expected, "{}", answer.body);
}
