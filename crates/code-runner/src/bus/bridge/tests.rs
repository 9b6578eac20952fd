//! The bridge's rules by themselves; through real guests, HTTP and the iii
//! engine in `tests/all/{bridge,operator}.rs`.

use super::*;
use serde_json::json;

/// Every denied pattern bites, whatever the case or padding; ordinary
/// ids and near misses pass.
#[test]
fn each_denied_pattern_is_refused() {
    for (id, rule) in [
        ("state::claim-namespace", "state::claim-namespace"),
        (" State::Claim-Namespace ", "state::claim-namespace"),
        ("harness::state::get", "harness::state::*"),
        ("harness::state", "harness::state::*"),
        (
            "provider-openai-codex::state::set",
            "provider-openai-codex::state::*",
        ),
        (
            "provider::openai-codex::login::start",
            "provider::openai-codex::{login,auth}::*",
        ),
        (
            "provider::openai-codex::auth::token",
            "provider::openai-codex::{login,auth}::*",
        ),
    ] {
        assert_eq!(denied_by(id), Some(rule), "{id}");
        let refusal = check(id, &json!({})).unwrap_err();
        assert!(refusal.to_string().contains(rule), "{refusal}");
        assert!(refusal.to_string().contains(id), "{refusal}");
    }
    for ok in [
        "state::get",
        "state::claim-namespaces",
        "harness::stateful",
        "harness::hook::pre-generate",
        "provider::openai-codex::generate",
        "provider::openai-codex::loginx::a",
        "code-runner::run",
        "engine::functions::info",
    ] {
        assert_eq!(denied_by(ok), None, "{ok}");
        assert!(
            check(ok, &json!({"function_id": "state::claim-namespace"})).is_ok(),
            "{ok}"
        );
    }
}

/// A trigger registration is checked by its target: a denied target, or
/// another trigger registration, is refused; an ordinary one passes.
#[test]
fn trigger_registration_targets_are_checked() {
    let register = "engine::register_trigger";
    let err = check(
        register,
        &json!({"trigger_type": "cron", "function_id": "harness::state::wipe"}),
    )
    .unwrap_err();
    assert!(err.reason.contains("harness::state::*"), "{err}");
    let err = check(
        register,
        &json!({"function_id": "engine::register_trigger"}),
    )
    .unwrap_err();
    assert!(err.reason.contains("another trigger registration"), "{err}");
    assert!(
        check(
            register,
            &json!({"function_id": "my-app::greet", "config": {}})
        )
        .is_ok()
    );
    assert!(check(register, &json!({"config": {}})).is_ok());
}

/// Guest code cannot change any configuration entry, however the function
/// or the entry is spelled, nor bind a trigger to a configuration writer;
/// reading stays open.
#[test]
fn configuration_changes_are_refused_to_guests() {
    for (id, entry) in [
        ("configuration::set", "code-runner"),
        (" Configuration::SET ", " Code-Runner "),
        ("configuration::register", "code-runner"),
        ("CONFIGURATION::Register\t", "iii-observability"),
        ("configuration::set", "my-app"),
        ("configuration::delete", "anything"),
    ] {
        let err = check(id, &json!({"id": entry, "value": {}})).unwrap_err();
        assert!(
            err.reason.contains("may not change any configuration"),
            "{err}"
        );
    }
    let own = check("configuration::register", &json!({"id": "code-runner"})).unwrap_err();
    assert!(
        own.reason.contains("code-runner's own configuration"),
        "{own}"
    );
    for writer in ["configuration::set", "Configuration::register"] {
        let err = check(
            "engine::register_trigger",
            &json!({"trigger_type": "cron", "function_id": writer}),
        )
        .unwrap_err();
        assert!(err.reason.contains("configuration"), "{err}");
    }
    for read in [
        "configuration::get",
        "configuration::list",
        " configuration::schema",
    ] {
        assert!(check(read, &json!({"id": "code-runner"})).is_ok(), "{read}");
    }
}

/// The engine's administrative functions are refused, called or bound.
#[test]
fn administrative_functions_are_refused() {
    for id in ADMINISTRATIVE.iter().chain(&[" Engine::Logs::Clear "]) {
        let err = check(id, &json!({})).unwrap_err();
        assert!(err.reason.contains("administrative"), "{err}");
        let err = check(
            "engine::register_trigger",
            &json!({"trigger_type": "cron", "function_id": id}),
        )
        .unwrap_err();
        assert!(err.reason.contains("administrative"), "{err}");
    }
    assert!(check("engine::logs::list", &json!({})).is_ok());
    let err = check(
        "engine::register_trigger",
        &json!({"trigger_type": "cron", "function_id": "engine::unregister_trigger"}),
    )
    .unwrap_err();
    assert!(err.reason.contains("another trigger registration"), "{err}");
}

/// A binding's type must be open; some types never are.
#[test]
fn trigger_types_must_be_opened_by_the_operator() {
    let open = vec!["cron".to_string()];
    assert!(triggers::admit_type(Some("cron"), &open).is_ok());
    assert!(triggers::admit_type(Some(" CRON "), &open).is_ok());
    let err = triggers::admit_type(Some("cron"), &[]).unwrap_err();
    assert!(
        err.contains("guest_trigger_types") && err.contains("none are"),
        "{err}"
    );
    let err = triggers::admit_type(Some("state"), &open).unwrap_err();
    assert!(err.contains("`state` is not one (open: cron)"), "{err}");
    for never in [
        "console:script",
        "harness::hook::pre-generate",
        "configuration",
        "log",
        "trace",
    ] {
        let listed = vec![never.to_string()];
        let err = triggers::admit_type(Some(never), &listed).unwrap_err();
        assert!(err.contains("never open"), "{never}: {err}");
    }
    assert!(
        triggers::admit_type(None, &open)
            .unwrap_err()
            .contains("trigger_type")
    );
}

/// A lineage unregisters only what it registered, and at most its bound.
#[test]
fn a_lineage_removes_only_its_own_triggers() {
    let lineage = crate::runtimes::lineage::Lineage::default();
    let begin = || {
        lineage
            .begin(None, crate::runtimes::lineage::Lasting::No, 32)
            .unwrap()
    };
    let (a, b) = (begin(), begin());
    let store = GuestTriggers::default();
    store.record(a, "t1");
    assert!(
        store
            .take(b, Some("t1"))
            .unwrap_err()
            .contains("not registered by this run")
    );
    assert!(store.take(a, None).unwrap_err().contains("`id`"));
    store.take(a, Some("t1")).unwrap();
    assert!(store.take(a, Some("t1")).is_err(), "taken once");
    for i in 0..MAX_TRIGGERS_PER_LINEAGE {
        assert!(store.has_room(a).is_ok());
        store.record(a, &format!("t{i}"));
    }
    assert!(store.has_room(a).unwrap_err().contains("at most 64"));
    assert!(store.has_room(b).is_ok());
    store.forget(a);
    assert!(store.has_room(a).is_ok());
}

/// A huge id is quoted back bounded.
#[test]
fn refusals_quote_ids_bounded() {
    let id = format!("state::claim-namespace{}", "x".repeat(10_000));
    assert!(check(&id, &json!({})).is_ok());
    let target = format!("harness::state::{}", "y".repeat(10_000));
    let err = check(
        "engine::register_trigger",
        &json!({ "function_id": target }),
    )
    .unwrap_err();
    assert!(err.to_string().len() < 600, "{}", err.to_string().len());
}

/// Issue 44: `code-runner::resume` (and every worker's scoped twin) decides
/// for a person, so it is refused to guest code in any spelling; look-alikes
/// are not.
#[test]
fn host_only_functions_are_refused_in_every_spelling() {
    for id in [
        "code-runner::resume",
        " Code-Runner::Resume ",
        "code-runner@box1::resume",
        "code-runner@w_2-x::resume",
        "code-runner@box1::usage",
    ] {
        assert!(is_host_only(id), "{id}");
        let refusal = check(id, &json!({})).unwrap_err();
        assert!(
            refusal.to_string().contains("decides for a person"),
            "{refusal}"
        );
    }
    for ok in [
        "code-runner::run",
        "code-runner::resumes",
        "code-runner@::resume",
        "code-runner@box1::run",
        "my-app::resume",
    ] {
        assert!(!is_host_only(ok), "{ok}");
    }
    let err = refuse_guest("code-runner::resume", "approving a call");
    assert_eq!(err.code, FORBIDDEN);
}

/// A trigger binding to a function that waits for a person's approval is
/// refused (the engine would call it as the host, with nobody asked), even
/// in an open trigger type.
#[test]
fn a_trigger_cannot_bind_a_function_that_waits_for_approval() {
    let lineage = crate::runtimes::lineage::Lineage::default();
    let root = lineage
        .begin(None, crate::runtimes::lineage::Lasting::No, 32)
        .unwrap();
    let store = GuestTriggers::default();
    let open = vec!["cron".to_string()];
    let gated = |id: &str| id == "billing::charge";
    let bind = |target: &str| json!({"trigger_type": "cron", "function_id": target, "config": {}});
    let err = admit(
        &store,
        &open,
        root,
        "engine::register_trigger",
        &bind("billing::charge"),
        gated,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("waits for a person's approval"),
        "{err}"
    );
    admit(
        &store,
        &open,
        root,
        "engine::register_trigger",
        &bind("billing::quote"),
        gated,
    )
    .unwrap();
}
