use std::time::Duration;

use code_runner_core::files::Collected;

use super::*;

fn file(path: &str, bytes: &[u8]) -> Collected {
    Collected {
        path: path.into(),
        mime_type: "text/plain",
        bytes: bytes.to_vec(),
    }
}

const TTL: Duration = Duration::from_secs(600);

/// A uri round-trips its path, escapes included; malformed ones are refused
/// naming why.
#[test]
fn uris_round_trip_and_bad_ones_are_named() {
    let made = uri("lk_abc", "out/a b/é.csv");
    assert_eq!(made, "code-runner://files/lk_abc/out/a%20b/%C3%A9.csv");
    assert_eq!(
        parse(&made).unwrap(),
        ("lk_abc", "out/a b/é.csv".to_string())
    );
    for bad in [
        "file:///etc/passwd",
        "code-runner://files/lk_abc",
        "code-runner://files/rt_abc/x",
        "code-runner://files/lk_abc/%zz",
    ] {
        let err = parse(bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad}");
        assert!(err.message.contains("uri"), "{}", err.message);
    }
}

/// A set is read by its uri; another token or path is unknown; a kept
/// runtime's set goes with it and a read says so.
#[test]
fn sets_are_read_by_uri_and_forgotten_with_their_runtime() {
    let links = Links::default();
    let owner = RuntimeKey::new(7);
    links
        .keep("lk_one", vec![file("a.txt", b"hello")], Some(owner), TTL)
        .unwrap();
    let read = links.read(&uri("lk_one", "a.txt"), TTL).unwrap();
    assert_eq!((&read.path[..], &read.bytes[..]), ("a.txt", &b"hello"[..]));
    let unknown = links
        .read(&uri("lk_twoSecretSecret", "a.txt"), TTL)
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::RuntimeNotFound);
    assert!(
        !unknown.message.contains("SecretSecret"),
        "the token is cut: {}",
        unknown.message
    );
    assert!(links.read(&uri("lk_one", "b.txt"), TTL).is_err());
    links.forget(owner);
    let gone = links.read(&uri("lk_one", "a.txt"), TTL).unwrap_err();
    assert!(
        gone.message.contains("runtime has ended"),
        "{}",
        gone.message
    );
    assert_eq!(links.held(), (0, 0));
}

/// A one-shot's set expires after the TTL unread; a kept runtime's does not.
#[test]
fn one_shot_sets_expire_unread() {
    let links = Links::default();
    links
        .keep("lk_a", vec![file("a", b"x")], None, TTL)
        .unwrap();
    links
        .keep("lk_b", vec![file("b", b"x")], Some(RuntimeKey::new(1)), TTL)
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let expired = links
        .read(&uri("lk_a", "a"), Duration::from_millis(5))
        .unwrap_err();
    assert!(expired.message.contains("expired"), "{}", expired.message);
    assert!(
        links
            .read(&uri("lk_b", "b"), Duration::from_millis(5))
            .is_ok()
    );
}

/// The store is bounded: new sets push out the least recently used, a read
/// of one says so, and a set larger than the store is refused.
#[test]
fn the_store_is_bounded_and_pushes_out_the_oldest() {
    let links = Links::default();
    let chunk = vec![0u8; STORE_BYTES / 4];
    for i in 0..6 {
        links
            .keep(&format!("lk_{i}"), vec![file("f", &chunk)], None, TTL)
            .unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let (bytes, sets) = links.held();
    assert!(bytes <= STORE_BYTES && sets == 3, "{bytes} in {sets}");
    let pushed = links.read(&uri("lk_0", "f"), TTL).unwrap_err();
    assert!(pushed.message.contains("pushed out"), "{}", pushed.message);
    assert!(links.read(&uri("lk_5", "f"), TTL).is_ok());
    let too_big = links
        .keep(
            "lk_big",
            vec![file("f", &vec![0u8; STORE_BYTES + 1])],
            None,
            TTL,
        )
        .unwrap_err();
    assert_eq!(too_big.code, ErrorCode::ResourceExhausted);
}

/// Many empty files still cost the store: their count is bounded too.
#[test]
fn empty_files_count() {
    let links = Links::default();
    let many: Vec<Collected> = (0..1000).map(|i| file(&format!("e{i}"), b"")).collect();
    links.keep("lk_e", many, None, TTL).unwrap();
    assert!(links.held().0 >= 1000 * 128);
}
