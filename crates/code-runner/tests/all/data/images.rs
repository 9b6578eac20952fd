//! `images`: the figures a python program shows, in order, as base64 PNG,
//! cleared per turn and bounded by `max_images` and `max_image_bytes`.

use serde_json::{Value, json};

use crate::helpers::Server;

/// Shows one figure per size in `sizes` (inches at 100 dpi), in order.
fn show(sizes: &[(u32, u32)]) -> String {
    let mut code = String::from("import matplotlib.pyplot as plt\n");
    for (w, h) in sizes {
        code.push_str(&format!(
            "plt.figure(figsize=({w}, {h}), dpi=100); plt.plot([1, 2, 3]); plt.show()\n"
        ));
    }
    code
}

/// The standard alphabet's value of one base64 character.
fn sextet(c: u8) -> u32 {
    match c {
        b'A'..=b'Z' => u32::from(c - b'A'),
        b'a'..=b'z' => u32::from(c - b'a') + 26,
        b'0'..=b'9' => u32::from(c - b'0') + 52,
        b'+' => 62,
        b'/' => 63,
        other => panic!("not base64: {other}"),
    }
}

/// The width and height of a base64 PNG, read from its header.
fn png_size(data: &str) -> (u32, u32) {
    let bytes: Vec<u8> = data.as_bytes()[..32]
        .chunks(4)
        .flat_map(|quad| {
            let n = quad.iter().fold(0, |n, c| n << 6 | sextet(*c));
            [(n >> 16) as u8, (n >> 8) as u8, n as u8]
        })
        .collect();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let word =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    (word(16), word(20))
}

fn images(body: &Value) -> &Vec<Value> {
    body["images"]
        .as_array()
        .unwrap_or_else(|| panic!("images: {body}"))
}

/// Each shown figure comes back as a PNG, in the order shown, and a later
/// turn of the same runtime starts with none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shown_figures_come_back_in_order_and_clear_per_turn() {
    let server = Server::start().await;
    let answer = server
        .run_with(&show(&[(2, 1), (1, 2), (3, 3)]), json!({"keep": true}))
        .await;
    let body = answer.ok();
    let sizes: Vec<_> = images(body)
        .iter()
        .map(|image| {
            assert_eq!(image["mime_type"], "image/png");
            png_size(image["data"].as_str().unwrap())
        })
        .collect();
    assert_eq!(sizes, [(200, 100), (100, 200), (300, 300)]);
    let id = body["runtime_id"].as_str().unwrap().to_string();
    let next = server.run_on(&id, "result = 1").await;
    assert!(next.ok().get("images").is_none(), "{}", next.body);
    let failed = server
        .run_on(&id, &format!("{}raise ValueError('x')", show(&[(1, 1)])))
        .await;
    let body = failed.ok();
    assert_eq!(body["exit_code"], 1);
    assert_eq!(images(body).len(), 1, "a failed turn keeps what it showed");
    server.teardown(&id).await.ok();
}

/// Past `max_images` the list ends with a marker counting the rest; past
/// `max_image_bytes` too; the marker names the cap that cut the list; `0`
/// disables a cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_bounded_by_count_and_bytes_with_a_marker() {
    let three = show(&[(1, 1), (1, 1), (1, 1)]);
    let server = Server::with_config("max_images: 2\n").await;
    let body = server.run(&three).await.ok().clone();
    let list = images(&body);
    assert_eq!(list.len(), 3, "{body}");
    assert_eq!(list[2]["mime_type"], "text/plain");
    let marker = list[2]["data"].as_str().unwrap();
    assert!(
        marker.contains("1 more image") && marker.contains("at most 2 images"),
        "{marker}"
    );

    let server = Server::with_config("max_image_bytes: 100\n").await;
    let body = server.run(&three).await.ok().clone();
    let list = images(&body);
    assert_eq!(list.len(), 1, "{body}");
    let marker = list[0]["data"].as_str().unwrap();
    assert!(marker.contains("3 more images"), "{marker}");
    // The size cap cut the list, not the count cap (8 by default): the
    // marker names the one that did.
    assert!(
        marker.contains("at most 100 bytes of image data (max_image_bytes)")
            && !marker.contains("8 images"),
        "{marker}"
    );

    let server = Server::with_config("max_images: 0\nmax_image_bytes: 0\n").await;
    let body = server.run(&three).await.ok().clone();
    assert!(
        images(&body)
            .iter()
            .all(|image| image["mime_type"] == "image/png")
    );
    assert_eq!(images(&body).len(), 3);
}

/// The caps are next-call keys: a change applies to the very next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_caps_apply_to_the_next_call() {
    let server = Server::start().await;
    let answer = server
        .call(
            "configuration::set",
            json!({"id": "code-runner", "value": {"max_images": 1}}),
        )
        .await;
    assert_eq!(
        answer.ok()["applied"],
        json!(["max_images"]),
        "{}",
        answer.body
    );
    let body = server.run(&show(&[(1, 1), (1, 1)])).await.ok().clone();
    assert_eq!(images(&body).len(), 2);
    assert_eq!(images(&body)[1]["mime_type"], "text/plain");
}

/// The response schema and `engine::functions::info` show the field, and
/// the configuration's schema the caps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_schema_shows_images() {
    use crate::helpers::{FUNCTIONS_INFO, RUN};
    let server = Server::start().await;
    let ids = json!({"function_ids": [RUN, "configuration::set"]});
    let answer = server.call(FUNCTIONS_INFO, ids).await;
    let functions = answer.ok()["functions"].as_array().unwrap().clone();
    let images = &functions[0]["response_schema"]["properties"]["images"];
    assert_eq!(images["type"], "array", "{}", functions[0]);
    let schema = functions[0]["response_schema"].to_string();
    assert!(schema.contains("mime_type"), "{schema}");
    let config = functions[1]["request_schema"].to_string();
    for key in ["max_images", "max_image_bytes", "python_interpreter"] {
        assert!(config.contains(key), "{key} in {config}");
    }
}
