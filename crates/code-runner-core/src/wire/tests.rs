//! The wire types against the contract: schemas field for field, bounded
//! parsing, unknown fields refused by name, absent keys left out.

use super::*;
use serde_json::json;

/// `(property, JSON Schema type)` pairs and the required list of one schema.
fn shape(schema: &Value) -> (Vec<(String, Value)>, Vec<String>) {
    let props = schema["properties"].as_object().expect("properties");
    let mut pairs: Vec<(String, Value)> = props
        .iter()
        .map(|(k, v)| (k.clone(), v.get("type").cloned().unwrap_or(Value::Null)))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    required.sort();
    (pairs, required)
}

fn pairs(items: &[(&str, Value)]) -> Vec<(String, Value)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The schemas match the contract's field for field (names, types,
/// required); `memory_mb`, `collect_mode` and `checkpoint` are documented additions.
#[test]
fn schemas_match_the_contract() {
    let run = schema_of::<RunRequest>();
    assert_eq!(run["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(run["title"], "RunRequest");
    assert_eq!(
        shape(&run),
        (
            pairs(&[
                ("checkpoint", json!("boolean")),
                ("code", json!("string")),
                ("collect", json!("array")),
                ("collect_mode", Value::Null),
                ("files", json!("array")),
                ("keep", json!("boolean")),
                ("lang", Value::Null),
                ("memory_mb", json!(["integer", "null"])),
                ("runtime_id", json!(["string", "null"])),
                ("timeout_ms", json!(["integer", "null"])),
            ]),
            vec!["code".to_string()]
        )
    );
    assert_eq!(run["properties"]["keep"]["default"], json!(false));
    assert_eq!(run["properties"]["lang"]["default"], Value::Null);
    assert_eq!(
        run["definitions"]["Lang"]["enum"],
        json!(["node", "python", "typescript"])
    );

    let response = schema_of::<RunResponse>();
    assert_eq!(
        shape(&response),
        (
            pairs(&[
                ("duration_ms", json!("integer")),
                ("exit_code", json!("integer")),
                ("files", json!("array")),
                ("images", json!("array")),
                ("restored", json!("boolean")),
                ("result", Value::Null),
                ("result_note", json!(["string", "null"])),
                ("runtime_id", json!(["string", "null"])),
                ("runtime_reset", Value::Null),
                ("stderr", json!("string")),
                ("stdout", json!("string")),
                ("success", json!("boolean")),
                ("suspended", Value::Null),
                ("usage", Value::Null),
            ]),
            [
                "duration_ms",
                "exit_code",
                "result",
                "stderr",
                "stdout",
                "success"
            ]
            .map(String::from)
            .to_vec()
        )
    );

    let usage = &response["definitions"]["Usage"];
    assert_eq!(
        shape(usage),
        (
            pairs(&[
                ("cpu_ms", json!("number")),
                // Issue 30: present only when the run made requests.
                ("egress", Value::Null),
                ("peak_memory_bytes", json!("integer")),
                ("wall_ms", json!("integer")),
            ]),
            ["cpu_ms", "peak_memory_bytes", "wall_ms"]
                .map(String::from)
                .to_vec()
        )
    );

    let teardown = schema_of::<TeardownRequest>();
    assert_eq!(
        shape(&teardown),
        (
            pairs(&[
                ("namespace", json!(["string", "null"])),
                ("runtime_id", json!(["string", "null"]))
            ]),
            vec![]
        )
    );
    let torn = schema_of::<TeardownResponse>();
    assert_eq!(
        shape(&torn),
        (
            pairs(&[
                ("namespace", json!(["string", "null"])),
                ("runtime_id", json!(["string", "null"])),
                ("torn_down", json!("boolean")),
                ("unregistered", json!("array")),
            ]),
            vec!["torn_down".to_string(), "unregistered".to_string()]
        )
    );
}

/// `register_function`'s schemas match the contract's API reference:
/// names, types, required fields, defaults and the `Lang` reference.
#[test]
fn register_schemas_match_the_contract() {
    let request = schema_of::<RegisterRequest>();
    assert_eq!(
        request["$schema"],
        "http://json-schema.org/draft-07/schema#"
    );
    assert_eq!(request["title"], "RegisterRequest");
    assert_eq!(
        shape(&request),
        (
            pairs(&[
                ("description", json!(["string", "null"])),
                ("function_id", json!("string")),
                ("lang", Value::Null),
                ("request_format", Value::Null),
                ("requires_approval", json!("boolean")),
                ("response_format", Value::Null),
                ("source", json!("string")),
            ]),
            ["function_id", "lang", "source"].map(String::from).to_vec()
        )
    );
    let props = &request["properties"];
    assert_eq!(props["description"]["default"], Value::Null);
    assert_eq!(props["request_format"]["default"], Value::Null);
    assert_eq!(props["response_format"]["default"], Value::Null);
    assert_eq!(
        props["lang"]["allOf"][0]["$ref"],
        json!("#/definitions/Lang"),
        "{}",
        props["lang"]
    );
    assert_eq!(
        props["lang"]["description"],
        "Language of the namespace runtime this handler runs in."
    );
    assert_eq!(
        request["definitions"]["Lang"]["enum"],
        json!(["node", "python", "typescript"])
    );
    assert!(
        props["request_format"]["description"]
            .as_str()
            .unwrap()
            .contains("16 KiB")
    );

    let response = schema_of::<RegisterResponse>();
    assert_eq!(response["title"], "RegisterResponse");
    assert_eq!(
        shape(&response),
        (
            pairs(&[
                ("function_id", json!("string")),
                ("registered", json!("boolean")),
            ]),
            ["function_id", "registered"].map(String::from).to_vec()
        )
    );
}

/// The info request is refused while parsing once it names more than
/// `MAX_INFO_IDS` ids, and its schema says so.
#[test]
fn info_request_is_bounded_while_parsing() {
    let ids: Vec<String> = (0..MAX_INFO_IDS).map(|i| format!("a::{i}")).collect();
    let ok: FunctionsInfoRequest = serde_json::from_value(json!({ "function_ids": ids })).unwrap();
    assert_eq!(ok.function_ids.len(), MAX_INFO_IDS);
    let too_many: Vec<&str> = vec!["a::b"; MAX_INFO_IDS + 1];
    let err = serde_json::from_value::<FunctionsInfoRequest>(json!({ "function_ids": too_many }))
        .unwrap_err();
    assert!(
        err.to_string().contains("more than 1000 function ids"),
        "{err}"
    );
    let schema = schema_of::<FunctionsInfoRequest>();
    assert_eq!(schema["properties"]["function_ids"]["maxItems"], 1000);
}

/// Unknown fields and wrong types are refused by name.
#[test]
fn requests_refuse_unknown_fields() {
    let err = serde_json::from_value::<RunRequest>(json!({"code": "x", "timeout": 5})).unwrap_err();
    assert!(err.to_string().contains("unknown field `timeout`"), "{err}");
    assert!(serde_json::from_value::<RunRequest>(json!({"code": "x", "lang": "ruby"})).is_err());
}

/// A response without a runtime omits the key entirely; a null result stays.
#[test]
fn absent_runtime_id_is_absent_not_null() {
    let response = RunResponse {
        usage: crate::wire::Usage::default(),
        stdout: String::new(),
        stderr: String::new(),
        exit_code: 0,
        success: true,
        duration_ms: 1,
        result: Value::Null,
        runtime_id: None,
        images: Vec::new(),
        files: Vec::new(),
        suspended: None,
        result_note: None,
        runtime_reset: None,
        restored: false,
    };
    let value = serde_json::to_value(response).unwrap();
    assert!(value.get("runtime_id").is_none());
    assert!(value.get("result_note").is_none() && value.get("runtime_reset").is_none());
    assert!(value.get("images").is_none(), "no images, no key");
    assert!(value.get("files").is_none(), "no files, no key");
    assert_eq!(value.get("result"), Some(&Value::Null));
}

/// `files` and `collect` default to empty; a file input refuses unknown
/// fields; the collected file's schema has its four required fields.
#[test]
fn files_in_and_out_shapes() {
    let run: RunRequest = serde_json::from_value(json!({"code": "x"})).unwrap();
    assert!(run.files.is_empty() && run.collect.is_empty());
    let run: RunRequest = serde_json::from_value(json!({
        "code": "x",
        "files": [{"path": "a.txt", "text": "hi"}, {"path": "b.bin", "base64": "AAE="}],
        "collect": ["out/*.csv"],
    }))
    .unwrap();
    assert_eq!(run.files[0].text.as_deref(), Some("hi"));
    assert_eq!(run.files[1].base64.as_deref(), Some("AAE="));
    assert_eq!(run.collect, vec!["out/*.csv".to_string()]);
    let back = serde_json::to_value(RunRequest {
        files: Vec::new(),
        collect: Vec::new(),
        ..run
    })
    .unwrap();
    assert!(back.get("files").is_none() && back.get("collect").is_none());
    let err = serde_json::from_value::<RunRequest>(
        json!({"code": "x", "files": [{"path": "a", "data": "x"}]}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `data`"), "{err}");

    let run = schema_of::<RunRequest>();
    let input = &run["definitions"]["FileInput"];
    assert_eq!(
        shape(input),
        (
            pairs(&[
                ("base64", json!(["string", "null"])),
                ("path", json!("string")),
                ("text", json!(["string", "null"])),
            ]),
            vec!["path".to_string()]
        )
    );
    let response = schema_of::<RunResponse>();
    let collected = &response["definitions"]["CollectedFile"];
    assert_eq!(
        shape(collected),
        (
            pairs(&[
                ("base64", json!(["string", "null"])),
                ("mime_type", json!("string")),
                ("path", json!("string")),
                ("preview", json!(["string", "null"])),
                ("size", json!("integer")),
                ("uri", json!(["string", "null"])),
            ]),
            ["mime_type", "path", "size"].map(String::from).to_vec()
        )
    );
}
