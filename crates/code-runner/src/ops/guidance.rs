//! `code-runner::inject-guidance`: the agent harness's `pre_generate` hook.
//!
//! It appends our usage guidance (`guidance.md`, with the caps and timeouts
//! in force) to the system prompt. Hooks re-run on redelivered steps, so it is
//! idempotent: the guidance sits between fixed tags, and a prompt that
//! already carries it gets it refreshed in place (when a cap changed) or is
//! left alone. A payload it cannot read, or `inject_guidance: false`, gets
//! the no-op answer `{"mutations": {}}`: a failing `pre_*` hook would fail
//! the agent's turn.

use std::sync::Arc;

use code_runner_core::Config;
use code_runner_core::wire::schema_of;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::Function;
use crate::bus::names::INJECT_GUIDANCE;
use crate::ops::egress::EgressState;
use crate::ops::{Ops, handler};
use crate::runtimes::engines::{Engines, Offer};
use crate::settings::Settings;

/// The guidance, with `{key}` placeholders for configuration values.
const TEMPLATE: &str = include_str!("guidance.md");
/// Opens the guidance block; how a prompt that already carries it is recognised.
const BEGIN: &str = "<code-runner-guidance>";
/// Closes the guidance block.
const END: &str = "</code-runner-guidance>";

// The hook's wire types are crate-private so that only the descriptions the
// contract's schemas carry appear in them (schemars turns doc comments into
// descriptions, and a described `$ref` into an `allOf`).

// The slice of the `pre_generate` hook envelope this hook reads.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(
    title = "PreGenerateEvent",
    description = "The part of the `pre_generate` hook envelope this hook reads; every other field is ignored."
)]
pub(crate) struct PreGenerateEvent {
    #[serde(default)]
    generate: GenerateContext,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct GenerateContext {
    /// The system prompt as assembled so far (the base plus earlier hooks' mutations).
    #[serde(default)]
    system_prompt: String,
}

// The hook's answer: the mutations the harness applies to the generation.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(
    title = "PreGenerateResponse",
    description = "The hook's answer to the harness: mutations to apply to the generation."
)]
pub(crate) struct PreGenerateResponse {
    mutations: PreGenerateMutations,
}

/// The harness applies `system_prompt` only when present, so an absent one
/// (`{}`) is the no-op that keeps the prompt the harness assembled.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub(crate) struct PreGenerateMutations {
    /// The whole new system prompt (the old one plus our guidance): the harness replaces, it does not merge.
    #[serde(skip_serializing_if = "Option::is_none")]
    system_prompt: Option<String>,
}

/// Registers the hook on the bus (internal: the harness calls it, people do not).
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        INJECT_GUIDANCE,
        Function::new(
            "Internal pre_generate hook: appends code-runner's usage guidance (run, keep, register, teardown, output caps) to an agent's system prompt, once. Bound to the harness's pre-generate hook, not called directly. inject_guidance: false in the code-runner configuration turns it into a no-op.",
            schema_of::<PreGenerateEvent>(),
            schema_of::<PreGenerateResponse>(),
            handler(ops, |(settings, engines): (Arc<Settings>, Arc<Engines>), payload| async move {
                Ok(hook(&settings.in_force(), &engines.offer(), payload))
            }),
        )
        .internal(),
    )
}

/// The hook's answer to `payload` under `config`.
fn hook(config: &Config, python: &Offer, payload: Value) -> Value {
    let no_op = PreGenerateMutations::default();
    let mutations = if !config.inject_guidance {
        no_op
    } else {
        match serde_json::from_value::<PreGenerateEvent>(payload) {
            Ok(event) => PreGenerateMutations {
                system_prompt: inject(&event.generate.system_prompt, &render(config, python)),
            },
            Err(err) => {
                tracing::warn!("{INJECT_GUIDANCE}: unreadable payload ({err}); prompt left as is");
                no_op
            }
        }
    };
    serde_json::to_value(PreGenerateResponse { mutations }).unwrap_or(Value::Null)
}

/// The first `n` of `items` joined with commas, then how many more there
/// are: how every text names a list that may be long.
pub fn first_of(items: &[String], n: usize) -> String {
    let mut named = items.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > n {
        named.push_str(&format!(" and {} more", items.len() - n));
    }
    named
}

/// What the network is, as the texts say it: none, or HTTP(S) through the
/// host to the hosts `egress_allow` lists (at most ten of them named).
fn network(config: &Config) -> String {
    let allowed = EgressState::allowed(config);
    if allowed.is_empty() {
        return "no network".to_string();
    }
    let named = first_of(&allowed, 10);
    format!(
        "network only as HTTP(S) through the host (JavaScript `fetch`, python `urllib`) to {named}{}",
        secrets(config)
    )
}

/// The operator's `egress_secrets` by name (never a value or its variable),
/// each with its hosts, so a model knows what it may send where: at most
/// ten, then a count; empty when there are none.
fn secrets(config: &Config) -> String {
    let secrets = &config.egress_secrets;
    if secrets.is_empty() {
        return String::new();
    }
    let mut named = secrets
        .iter()
        .take(10)
        .map(|(name, secret)| format!("{name} (for {})", secret.hosts.join(", ")))
        .collect::<Vec<_>>()
        .join(", ");
    if secrets.len() > 10 {
        named.push_str(&format!(" and {} more", secrets.len() - 10));
    }
    format!(
        "; secrets, by name: {named}. Put the placeholder (`iii.secrets.NAME` in JavaScript, `os.environ[\"NAME\"]` in python) in a request header; the host sends the value only to that secret's hosts"
    )
}

/// The operator's `python_packages` as the texts name them (at most ten,
/// then a count), or `None` when there are none.
fn operator_packages(config: &Config, python: &Offer) -> Option<String> {
    let packages = &config.python_packages;
    if packages.is_empty() {
        return None;
    }
    // What the stack provides of the list (its headline packages aside,
    // which the texts name anyway), and what it shadows.
    const HEADLINE: [&str; 6] = [
        "numpy",
        "pandas",
        "scipy",
        "scikit-learn",
        "statsmodels",
        "matplotlib",
    ];
    let provided: Vec<&str> = python
        .provided
        .iter()
        .map(String::as_str)
        .filter(|p| !HEADLINE.iter().any(|h| p.split("==").next() == Some(*h)))
        .collect();
    let mut shadowed = match provided.as_slice() {
        [] => String::new(),
        some if some.len() > 10 => format!(
            " (from the data stack: {} and {} more)",
            some[..10].join(", "),
            some.len() - 10
        ),
        some => format!(" (from the data stack: {})", some.join(", ")),
    };
    if !python.shadowed.is_empty() {
        shadowed.push_str(&format!(" (but {})", python.shadowed.join("; ")));
    }
    let mut named = first_of(packages, 10);
    named.push_str(&shadowed);
    Some(named)
}

/// The operator's npm packages as the texts name them (at most ten, then a
/// count): as installed (`name@version`), or as listed while they install;
/// `None` when there are none.
fn npm_packages(config: &Config, offer: &Offer) -> Option<String> {
    let packages = match offer.node_packages.is_empty() {
        true => &config.node_packages,
        false => &offer.node_packages,
    };
    if packages.is_empty() {
        return None;
    }
    Some(first_of(packages, 10))
}

/// What JavaScript imports beyond its own library, as a clause the texts
/// append (empty when the operator listed no npm packages).
fn npm_clause(config: &Config, offer: &Offer) -> String {
    npm_packages(config, offer).map_or(String::new(), |named| {
        format!(
            "; JavaScript and TypeScript import the operator's npm packages {named} (`import {{ z }} from 'zod'`)"
        )
    })
}

/// What the sandbox offers and refuses, as the tool and function texts say
/// it: the network `egress_allow` opens, the data stack when python runs it,
/// and the operator's `python_packages`.
pub fn sandbox_sentence(config: &Config, python: &Offer) -> String {
    let sentence = python_sentence(config, python);
    sentence + &npm_clause(config, python) + &install_clause(config)
}

/// The `install` tool, when the operator allows any package (empty when not).
fn install_clause(config: &Config) -> String {
    if config.install_allow.is_empty() {
        return String::new();
    }
    let allowed = match config.install_allow.iter().any(|name| name == "*") {
        true => "any pure package".to_string(),
        false => first_of(&config.install_allow, 10),
    };
    format!("; the install tool adds packages to a kept runtime (the operator allows {allowed})")
}

fn python_sentence(config: &Config, python: &Offer) -> String {
    let network = network(config);
    let extra = operator_packages(config, python);
    match (python.data_stack, extra) {
        (true, extra) => format!(
            "{network}, no host files, nothing to install; python has numpy, pandas, scipy, \
             scikit-learn, statsmodels and matplotlib (plt.show() returns the figure in `images`){}",
            extra.map_or(String::new(), |named| format!(
                ", and the operator's packages {named}"
            ))
        ),
        (false, Some(named)) => format!(
            "{network}, no host files, nothing to install; python has the standard library and \
             the operator's packages {named}"
        ),
        (false, None) => {
            format!("{network}, no host files, no packages beyond the standard library")
        }
    }
}

/// The guidance's last line: the network, and what can and cannot be
/// imported, with the operator's npm packages when there are any.
fn packages_line(config: &Config, python: &Offer) -> String {
    let mut line = python_packages_line(config, python);
    let install = install_clause(config);
    if let Some(clause) = install.strip_prefix("; t") {
        line.push_str(&format!(" T{clause}."));
    }
    match npm_packages(config, python) {
        None => line,
        Some(named) => format!(
            "{line} JavaScript and TypeScript can import these npm packages the operator installed (`import {{ z }} from 'zod'`, subpath exports, `await import()`): {named}."
        ),
    }
}

fn python_packages_line(config: &Config, python: &Offer) -> String {
    let data_stack = python.data_stack;
    let network = network(config);
    let network = network[..1].to_uppercase() + &network[1..];
    if let Some(named) = operator_packages(config, python) {
        let stack = match data_stack {
            true => {
                "numpy, pandas, scipy, scikit-learn, statsmodels and matplotlib (`plt.show()` returns each figure in the answer's `images`), and "
            }
            false => "the standard library and ",
        };
        return format!(
            "- {network}, and nothing can be installed: `pip install` and `npm install` cannot work. Python has {stack}these packages the operator installed, ready to import: {named}. Otherwise use your own code."
        );
    }
    match data_stack {
        true => format!(
            "- {network}, and nothing can be installed: `pip install` and `npm install` cannot work. Python has numpy, pandas, scipy, scikit-learn, statsmodels and matplotlib ready to import; `plt.show()` returns each figure in the answer's `images`. Otherwise use the standard library and your own code."
        ),
        false if network == "No network" => "- No network and no packages: `pip install` and `npm install` cannot work. Use the standard library and your own code (write your own modules to files and load them).".to_string(),
        false => format!(
            "- {network}; no packages: `pip install` and `npm install` cannot work. Use the standard library and your own code (write your own modules to files and load them)."
        ),
    }
}

/// The guidance block with the configuration's numbers filled in, for a
/// worker whose python runs the data stack or not.
pub fn render(config: &Config, python: &Offer) -> String {
    let cap = |bytes: u64| match bytes {
        0 => "its cap (none is set now)".to_string(),
        bytes => format!("{bytes} bytes"),
    };
    TEMPLATE
        .replace("{max_result_bytes}", &cap(config.max_result_bytes))
        .replace("{max_stream_bytes}", &cap(config.max_stream_bytes))
        .replace(
            "{default_timeout_ms}",
            &config.default_timeout_ms.to_string(),
        )
        .replace("{max_timeout_ms}", &config.max_timeout_ms.to_string())
        .replace("{packages}", &packages_line(config, python))
        .replace("{sessions}", &sessions_sentence(config, python))
        .trim_end()
        .to_string()
}

/// What python sessions can do beyond a kept runtime (the data
/// interpreter, in-process): outlive idleness and restarts, and fork.
fn sessions_sentence(config: &Config, python: &Offer) -> String {
    if config.isolation != code_runner_core::Isolation::InProcess {
        return String::new();
    }
    // Python's lean interpreter keeps no snapshots; node's ledger always can.
    let which = match python.data_stack {
        true => "a kept runtime",
        false => "a kept node or TypeScript runtime",
    };
    let fork = format!(
        "`code-runner::snapshot {{\"runtime_id\": ...}}` then `code-runner::restore {{\"snapshot_id\": ...}}` forks {which} (a new runtime_id where it was) to try two continuations"
    );
    match config.hibernate_after_secs {
        0 => format!(" {fork}."),
        _ => format!(
            " Such a runtime outlives idleness and worker restarts: idle, it is saved and its runtime_id wakes it as it was (`\"restored\": true`; a node one replays its turns, so not after a turn that timed out); {fork}."
        ),
    }
}

/// `prompt` with `block` appended, or refreshed in place when the prompt
/// already carries a guidance block; `None` when it already carries this one.
fn inject(prompt: &str, block: &str) -> Option<String> {
    if let Some(start) = prompt.find(BEGIN)
        && let Some(len) = prompt[start..].find(END).map(|end| end + END.len())
    {
        let (before, present, after) = (
            &prompt[..start],
            &prompt[start..start + len],
            &prompt[start + len..],
        );
        if present == block {
            return None;
        }
        return Some(format!("{before}{block}{after}"));
    }
    if prompt.is_empty() {
        Some(block.to_string())
    } else {
        Some(format!("{prompt}\n\n{block}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(data_stack: bool) -> Offer {
        Offer {
            data_stack,
            ..Offer::default()
        }
    }
    use serde_json::json;

    fn prompt_after(config: &Config, prompt: &str) -> Value {
        hook(
            config,
            &offer(false),
            json!({"generate": {"system_prompt": prompt}}),
        )
    }

    /// The last line says what python can import: the data stack is named
    /// only where it runs.
    #[test]
    fn the_packages_line_follows_the_interpreter() {
        let lean = render(&Config::default(), &offer(false));
        assert!(lean.contains("No network and no packages"), "{lean}");
        assert!(
            !lean.contains("pandas") && !lean.contains("{packages}"),
            "{lean}"
        );
        let data = render(&Config::default(), &offer(true));
        assert!(data.contains("numpy, pandas"), "{data}");
        let open = Config {
            egress_allow: vec!["api.example.com".into(), "*.svc.example:8443".into()],
            ..Config::default()
        };
        let line = render(&open, &offer(false));
        assert!(
            line.contains("Network only as HTTP(S) through the host")
                && line.contains("api.example.com, *.svc.example:8443"),
            "{line}"
        );
        assert!(data.contains("`images`"), "{data}");
        let packages = Config {
            python_packages: vec!["tabulate==0.9.0".into(), "beautifulsoup4>=4.12".into()],
            ..Config::default()
        };
        for data_stack in [false, true] {
            let line = render(&packages, &offer(data_stack));
            assert!(
                line.contains("tabulate==0.9.0, beautifulsoup4>=4.12"),
                "{line}"
            );
            let sentence = sandbox_sentence(&packages, &offer(data_stack));
            assert!(
                sentence.contains("tabulate==0.9.0, beautifulsoup4>=4.12"),
                "{sentence}"
            );
        }
    }

    /// The secrets are named with their hosts (never their variables), in
    /// the guidance and the tools' sentence, so a model can use them.
    #[test]
    fn secrets_are_named_with_their_hosts() {
        let secret = |hosts: &[&str]| code_runner_core::EgressSecret {
            env: "BILLING_TOKEN_VAR".into(),
            hosts: hosts.iter().map(|h| (*h).to_string()).collect(),
            in_url: false,
        };
        let config = Config {
            egress_allow: vec!["api.billing.example".into()],
            egress_secrets: [
                ("API_TOKEN".to_string(), secret(&["api.billing.example"])),
                (
                    "OTHER".to_string(),
                    secret(&["a.example", "http://b.example"]),
                ),
            ]
            .into(),
            ..Config::default()
        };
        for text in [
            render(&config, &offer(false)),
            sandbox_sentence(&config, &offer(false)),
        ] {
            assert!(
                text.contains(
                    "secrets, by name: API_TOKEN (for api.billing.example), OTHER (for a.example, http://b.example)"
                ) && text.contains("`iii.secrets.NAME`"),
                "{text}"
            );
            assert!(!text.contains("BILLING_TOKEN_VAR"), "{text}");
        }
        assert!(!render(&Config::default(), &offer(false)).contains("secrets"));
    }

    /// What the stack provides of the list, and a module the interpreter
    /// shadows, are said in the guidance and in the tools' sentence.
    #[test]
    fn provided_and_shadowed_packages_are_said() {
        let packages = Config {
            python_packages: vec!["seaborn==0.13.2".into(), "enum34==1.1.10".into()],
            ..Config::default()
        };
        let python = Offer {
            data_stack: true,
            node_packages: Vec::new(),
            provided: vec!["numpy==2.5.2".into(), "seaborn==0.13.2".into()],
            shadowed: vec![
                "/packages/enum: the interpreter's own `enum` is what `import enum` gives".into(),
            ],
        };
        for text in [
            render(&packages, &python),
            sandbox_sentence(&packages, &python),
        ] {
            assert!(
                text.contains(
                    "seaborn==0.13.2, enum34==1.1.10 (from the data stack: seaborn==0.13.2) (but /packages/enum: the interpreter's own `enum`"
                ),
                "{text}"
            );
        }
    }

    /// The guidance is appended after the prompt, whole, with the caps in force.
    #[test]
    fn guidance_is_appended_with_the_caps_in_force() {
        let config = Config {
            max_stream_bytes: 100,
            ..Config::default()
        };
        let answer = prompt_after(&config, "You are helpful.");
        let prompt = answer["mutations"]["system_prompt"].as_str().unwrap();
        assert!(
            prompt.starts_with("You are helpful.\n\n<code-runner-guidance>"),
            "{prompt}"
        );
        assert!(prompt.ends_with("</code-runner-guidance>"), "{prompt}");
        assert!(prompt.contains("over 100 bytes each"), "{prompt}");
        assert!(prompt.contains("over 32768 bytes is replaced"), "{prompt}");
        assert!(
            !prompt.contains("_ms}") && !prompt.contains("_bytes}"),
            "{prompt}"
        );
    }

    /// A redelivered step does not get the guidance twice.
    #[test]
    fn a_prompt_with_the_guidance_is_left_alone() {
        let config = Config::default();
        let once = prompt_after(&config, "base");
        let prompt = once["mutations"]["system_prompt"].as_str().unwrap();
        assert_eq!(prompt_after(&config, prompt), json!({"mutations": {}}));
    }

    /// A changed cap refreshes the block in place instead of adding a second one.
    #[test]
    fn a_stale_block_is_replaced_in_place() {
        let old = prompt_after(&Config::default(), "base");
        let old = format!(
            "{} and after",
            old["mutations"]["system_prompt"].as_str().unwrap()
        );
        let config = Config {
            max_result_bytes: 0,
            ..Config::default()
        };
        let new = prompt_after(&config, &old);
        let new = new["mutations"]["system_prompt"].as_str().unwrap();
        assert_eq!(new.matches(BEGIN).count(), 1, "{new}");
        assert!(new.starts_with("base\n\n<code-runner-guidance>"), "{new}");
        assert!(new.ends_with("</code-runner-guidance> and after"), "{new}");
        assert!(new.contains("none is set now"), "{new}");
    }

    /// Off means the no-op; so does a payload the hook cannot read.
    #[test]
    fn off_or_unreadable_is_the_no_op() {
        let off = Config {
            inject_guidance: false,
            ..Config::default()
        };
        assert_eq!(prompt_after(&off, "base"), json!({"mutations": {}}));
        let on = Config::default();
        assert_eq!(
            hook(
                &on,
                &offer(false),
                json!({"generate": {"system_prompt": 5}})
            ),
            json!({"mutations": {}})
        );
        assert_eq!(
            hook(&on, &offer(false), json!("junk")),
            json!({"mutations": {}})
        );
        let empty = hook(
            &on,
            &offer(false),
            json!({"_caller_worker_id": "w", "point": "pre_generate"}),
        );
        assert!(
            empty["mutations"]["system_prompt"]
                .as_str()
                .unwrap()
                .starts_with(BEGIN)
        );
    }

    /// The operator's npm packages are named in both texts: as listed while
    /// they install, then with the versions installed.
    #[test]
    fn npm_packages_are_named() {
        let config = Config {
            node_packages: vec!["zod@3".into(), "lodash-es@4.17.21".into()],
            ..Config::default()
        };
        let listed = offer(false);
        assert!(render(&config, &listed).contains("npm packages the operator installed"));
        assert!(render(&config, &listed).contains("zod@3, lodash-es@4.17.21"));
        let installed = Offer {
            node_packages: vec!["zod@3.25.76".into()],
            ..offer(true)
        };
        let sentence = sandbox_sentence(&config, &installed);
        assert!(sentence.contains("npm packages zod@3.25.76"), "{sentence}");
        assert!(!sandbox_sentence(&Config::default(), &offer(true)).contains("npm packages"));
        let allowing = Config {
            install_allow: vec!["tabulate".into()],
            ..Config::default()
        };
        assert!(sandbox_sentence(&allowing, &listed).contains("the operator allows tabulate"));
        assert!(render(&allowing, &listed).contains("The install tool adds packages"));
        assert!(!render(&Config::default(), &listed).contains("install tool"));
    }
}
