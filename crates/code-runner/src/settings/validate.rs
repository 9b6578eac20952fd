//! One validation path for every value that can become the configuration:
//! a `configuration::set` payload, the YAML file (at boot or after a hand
//! edit) and `--config`. The value is checked against the configuration's
//! JSON Schema (the one an iii configuration worker would check it against),
//! then deserialised, then the relations between keys are checked.

use std::sync::LazyLock;

use code_runner_core::wire::schema_of;
use code_runner_core::{Config, RunnerError};
use serde_json::Value;

/// How many schema violations one error lists.
const MAX_REPORTED: usize = 5;

/// The configuration's JSON Schema (draft-07): every key typed, minimums
/// where they exist, `additionalProperties: false`.
pub(crate) fn config_schema() -> Value {
    schema_of::<Config>()
}

static VALIDATOR: LazyLock<Result<jsonschema::Validator, String>> =
    LazyLock::new(|| jsonschema::draft7::new(&config_schema()).map_err(|err| err.to_string()));

/// Parses YAML (JSON is YAML too); an empty document is every default.
///
/// # Errors
/// `code-runner::invalid_request` for malformed YAML or an invalid value,
/// naming the offending key.
pub(crate) fn parse_yaml(text: &str) -> Result<Config, RunnerError> {
    let value: Value = serde_yaml_ng::from_str(text)
        .map_err(|err| RunnerError::invalid(format!("configuration is not valid YAML: {err}")))?;
    parse_value(&value)
}

/// Validates a whole configuration value; missing keys take their defaults
/// and `null` is every default.
///
/// # Errors
/// `code-runner::invalid_request` naming each offending key: an unknown
/// key, a wrong type, a value under its minimum, or a failed relation
/// (`default_timeout_ms` above `max_timeout_ms`).
pub(crate) fn parse_value(value: &Value) -> Result<Config, RunnerError> {
    let empty = Value::Object(serde_json::Map::new());
    let value = if value.is_null() { &empty } else { value };
    let validator = VALIDATOR.as_ref().map_err(|err| {
        RunnerError::engine(format!("the configuration schema is invalid: {err}"))
    })?;
    let problems: Vec<String> = validator
        .iter_errors(value)
        .take(MAX_REPORTED)
        .map(|error| {
            let path = error.instance_path().to_string();
            match path.trim_start_matches('/') {
                "" => format!("configuration: {error}"),
                key => format!("config key `{key}`: {error}"),
            }
        })
        .collect();
    if !problems.is_empty() {
        return Err(RunnerError::invalid(problems.join("; ")));
    }
    let config: Config = serde_path_to_error::deserialize(value).map_err(|err| {
        let key = err.path().to_string();
        RunnerError::invalid(format!("config key `{key}`: {}", err.into_inner()))
    })?;
    config.validate()?;
    check_egress(&config)?;
    check_packages(&config)?;
    Ok(config)
}

/// `python_packages` entries are requirements pip reads from the index
/// (names and version specifiers, no URLs, paths or options), at most 64.
fn check_packages(config: &Config) -> Result<(), RunnerError> {
    let packages = &config.python_packages;
    if packages.len() > code_runner_python::MAX_PACKAGES {
        return Err(RunnerError::invalid(format!(
            "config key `python_packages`: {} entries (at most {})",
            packages.len(),
            code_runner_python::MAX_PACKAGES
        )));
    }
    for requirement in packages {
        code_runner_python::check_requirement(requirement)
            .map_err(|err| RunnerError::invalid(format!("config key {err}")))?;
    }
    let node = &config.node_packages;
    if node.len() > code_runner_v8::packages::MAX_PACKAGES {
        return Err(RunnerError::invalid(format!(
            "config key `node_packages`: {} entries (at most {})",
            node.len(),
            code_runner_v8::packages::MAX_PACKAGES
        )));
    }
    for spec in node {
        code_runner_v8::packages::check_spec(spec)
            .map_err(|err| RunnerError::invalid(format!("config key `node_packages`: {err}")))?;
    }
    if let Some(registry) = &config.npm_registry
        && !(registry.starts_with("https://") || registry.starts_with("http://"))
    {
        return Err(RunnerError::invalid(format!(
            "config key `npm_registry`: {registry:?} is not an http(s) URL"
        )));
    }
    for name in &config.install_allow {
        let spec_ok = code_runner_v8::packages::check_spec(name).is_ok()
            && code_runner_v8::packages::split_spec(name).1.is_none();
        if name != "*" && !spec_ok {
            return Err(RunnerError::invalid(format!(
                "config key `install_allow`: {name:?} is not a package name or `*`"
            )));
        }
    }
    Ok(())
}

/// The configuration's `egress_secrets` as the egress crate takes them.
pub(crate) fn secret_specs(config: &Config) -> Vec<code_runner_egress::SecretSpec> {
    config
        .egress_secrets
        .iter()
        .map(|(name, secret)| code_runner_egress::SecretSpec {
            name: name.clone(),
            env: secret.env.clone(),
            hosts: secret.hosts.clone(),
            in_url: secret.in_url,
        })
        .collect()
}

/// `egress_allow` and `egress_secrets` entries parse (a secret's variable
/// is read when a request needs it: unset, the requests are refused).
fn check_egress(config: &Config) -> Result<(), RunnerError> {
    code_runner_egress::Allow::parse(&config.egress_allow)
        .map_err(|err| RunnerError::invalid(format!("config key `egress_allow`: {err}")))?;
    code_runner_egress::Secrets::load(&secret_specs(config), |_| Some("set-for-the-check".into()))
        .map(drop)
        .map_err(|err| RunnerError::invalid(format!("config key {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(value: Value) -> String {
        parse_value(&value).unwrap_err().message
    }

    /// The schema is what a settings form and the engine's configuration worker see.
    #[test]
    fn schema_types_every_key_and_refuses_unknown_ones() {
        let schema = config_schema();
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
        assert_eq!(schema["additionalProperties"], false);
        let properties = schema["properties"].as_object().unwrap();
        assert_eq!(properties.len(), 43);
        for (key, property) in properties {
            assert!(property.get("type").is_some(), "{key} is untyped");
            assert!(
                property.get("description").is_some(),
                "{key} is undocumented"
            );
        }
        assert_eq!(properties["max_runtimes"]["minimum"], 1);
        assert_eq!(properties["max_stream_bytes"]["minimum"], 0);
        assert_eq!(properties["max_memory_mb"]["minimum"], 40);
        assert_eq!(properties["max_stream_bytes"]["default"], 16384);
        assert_eq!(properties["max_images"]["default"], 8);
        assert_eq!(properties["python_interpreter"]["default"], "auto");
        assert_eq!(
            properties["python_interpreter"]["enum"],
            serde_json::json!(["auto", "lean", "data"])
        );
    }

    /// Each kind of bad value is refused naming its key.
    #[test]
    fn bad_values_are_refused_naming_the_key() {
        assert!(refusal(json!({"max_stream_bytes": -1})).contains("`max_stream_bytes`"));
        assert!(refusal(json!({"max_stream_bytes": "lots"})).contains("`max_stream_bytes`"));
        assert!(refusal(json!({"inject_guidance": 1})).contains("`inject_guidance`"));
        assert!(refusal(json!({"max_runtimes": 0})).contains("`max_runtimes`"));
        assert!(refusal(json!({"max_runtimez": 3})).contains("max_runtimez"));
        assert!(refusal(json!({"max_result_bytes": 1e300})).contains("max_result_bytes"));
        assert!(refusal(json!({"default_timeout_ms": 40000})).contains("default_timeout_ms"));
        assert!(refusal(json!([1])).contains("configuration"));
        assert!(refusal(json!({"egress_allow": ["a/b"]})).contains("`egress_allow`"));
        assert!(refusal(json!({"egress_max_in_flight": 0})).contains("egress_max_in_flight"));
        assert!(refusal(json!({"python_packages": ["--index-url=x"]})).contains("python_packages"));
        assert!(
            refusal(json!({"python_packages": ["a @ https://x/a.whl"]}))
                .contains("python_packages")
        );
        assert!(refusal(json!({"node_packages": ["x@git+https://h/x"]})).contains("node_packages"));
        assert!(refusal(json!({"install_allow": ["Bad Name"]})).contains("install_allow"));
        assert!(refusal(json!({"npm_registry": "file:///x"})).contains("npm_registry"));
        assert!(refusal(json!({"otlp_endpoint": "ftp://x"})).contains("otlp_endpoint"));
        assert!(refusal(json!({"otlp_endpoint": "http://"})).contains("otlp_endpoint"));
        let secret = json!({"egress_secrets": {"bad-name": {"env": "X", "hosts": ["a.example"]}}});
        assert!(refusal(secret).contains("bad-name"));
        let secret = json!({"egress_secrets": {"T": {"env": "X", "hosts": []}}});
        assert!(refusal(secret).contains("hosts"));
    }

    /// Absent keys take their defaults; YAML and JSON parse alike.
    #[test]
    fn missing_keys_take_defaults() {
        assert_eq!(parse_value(&Value::Null).unwrap(), Config::default());
        assert_eq!(parse_yaml("").unwrap(), Config::default());
        let config = parse_yaml("max_stream_bytes: 100\nscratch_root: /tmp/x\n").unwrap();
        assert_eq!(config.max_stream_bytes, 100);
        assert_eq!(
            config.scratch_root.as_deref(),
            Some(std::path::Path::new("/tmp/x"))
        );
        assert!(
            parse_yaml("max_stream_bytes: [")
                .unwrap_err()
                .message
                .contains("YAML")
        );
    }

    /// A configuration written out reads back equal, so `set` then `get` round-trips.
    #[test]
    fn a_written_configuration_reads_back_equal() {
        let config = Config {
            max_stream_bytes: 100,
            scratch_root: Some("/var/scratch".into()),
            ..Config::default()
        };
        let yaml = serde_yaml_ng::to_string(&config).unwrap();
        assert_eq!(parse_yaml(&yaml).unwrap(), config);
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(parse_value(&json).unwrap(), config);
    }
}
