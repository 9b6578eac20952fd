//! The format's checks, each on a snapshot made to fail it: nothing past a
//! failed check is parsed or decompressed, and each says which it was.

use proptest::prelude::*;

use super::*;

const ENGINE: &str = "python-data";
const IMAGE: &str = "5b4649f868e2c6dc-engine-cb0d24607f277917";
const BOUNDS: Bounds = Bounds {
    max_stored: 1 << 20,
    max_raw: 4 << 20,
};

fn contents() -> Contents {
    Contents {
        engine: ENGINE.into(),
        image: IMAGE.into(),
        created_at: 1_800_000_000,
        sections: vec![
            ("pages".into(), vec![7u8; 64 << 10]),
            ("globals".into(), (0..=255).collect()),
            ("work".into(), Vec::new()),
        ],
    }
}

/// A sealed snapshot opens to what was sealed.
#[test]
fn a_snapshot_round_trips() {
    let keys = Keys::of(Key::generate());
    let sealed = seal(&contents(), keys.signing()).unwrap();
    assert!(
        sealed.len() < 4096,
        "64 KiB of one byte compresses: {}",
        sealed.len()
    );
    assert_eq!(
        open(&sealed, &keys, ENGINE, IMAGE, BOUNDS).unwrap(),
        contents()
    );
}

/// Each way a snapshot can be wrong is its own refusal.
#[test]
fn each_bad_snapshot_is_refused_with_its_reason() {
    let keys = Keys::of(Key::generate());
    let sealed = seal(&contents(), keys.signing()).unwrap();
    let refused = |bytes: &[u8]| open(bytes, &keys, ENGINE, IMAGE, BOUNDS).unwrap_err();
    // Truncated anywhere: the MAC no longer matches, or there is no room for one.
    assert!(matches!(
        refused(&sealed[..10]),
        SnapshotError::Truncated(_)
    ));
    assert_eq!(refused(&sealed[..sealed.len() - 1]), SnapshotError::Forged);
    // One bit changed anywhere past the key id is a forgery.
    for at in [30, sealed.len() / 2, sealed.len() - 1] {
        let mut changed = sealed.clone();
        changed[at] ^= 1;
        assert_eq!(refused(&changed), SnapshotError::Forged, "bit at {at}");
    }
    // Another key's, or another worker's key id.
    let other = seal(&contents(), &Key::generate()).unwrap();
    assert!(matches!(refused(&other), SnapshotError::UnknownKey(_)));
    // Not a snapshot, or a future format.
    assert!(matches!(
        refused(&[0u8; 100]),
        SnapshotError::NotASnapshot(_)
    ));
    let mut future = sealed.clone();
    future[7] = 2;
    assert!(matches!(refused(&future), SnapshotError::NotASnapshot(_)));
    // Over the cap: refused before anything else is read.
    let small = Bounds {
        max_stored: 100,
        ..BOUNDS
    };
    assert!(matches!(
        open(&sealed, &keys, ENGINE, IMAGE, small).unwrap_err(),
        SnapshotError::Oversized { .. }
    ));
    // Whole and ours, but of another image or engine.
    assert!(matches!(
        open(&sealed, &keys, ENGINE, "another", BOUNDS).unwrap_err(),
        SnapshotError::OtherImage(_)
    ));
    assert!(matches!(
        open(&sealed, &keys, "node-ledger", IMAGE, BOUNDS).unwrap_err(),
        SnapshotError::OtherImage(_)
    ));
    // Authenticated, but decompressing past the raw cap is refused first.
    let tight = Bounds {
        max_raw: 1000,
        ..BOUNDS
    };
    assert!(matches!(
        open(&sealed, &keys, ENGINE, IMAGE, tight).unwrap_err(),
        SnapshotError::Oversized { .. }
    ));
}

/// A rotated key still opens what the old one signed; the new one signs.
#[test]
fn keys_rotate_and_live_in_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = Keys::load_or_create(dir.path()).unwrap();
    let again = Keys::load_or_create(dir.path()).unwrap();
    assert_eq!(first.signing().id, again.signing().id);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(keys::KEYS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let old = seal(&contents(), first.signing()).unwrap();
    let text = std::fs::read_to_string(dir.path().join(keys::KEYS_FILE)).unwrap();
    let fresh = Key::generate();
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let rotated = format!("{} {}\n{text}", hex(&fresh.id), hex(&fresh.secret));
    std::fs::write(dir.path().join(keys::KEYS_FILE), rotated).unwrap();
    let keys = Keys::load_or_create(dir.path()).unwrap();
    assert_eq!(keys.signing().id, fresh.id);
    assert_eq!(
        open(&old, &keys, ENGINE, IMAGE, BOUNDS).unwrap(),
        contents()
    );
    std::fs::write(dir.path().join(keys::KEYS_FILE), "not a key\n").unwrap();
    assert!(
        Keys::load_or_create(dir.path())
            .unwrap_err()
            .contains("line 1")
    );
}

/// The directory store writes whole files under well-formed names only,
/// reads within its cap, and keeps each kind apart.
#[test]
fn the_directory_store_is_atomic_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirStore::open(dir.path()).unwrap();
    let id = new_snapshot_id();
    assert!(store::is_snapshot_id(&id));
    store.put(Kind::Snapshot, &id, b"whole").unwrap();
    assert_eq!(
        store.get(Kind::Snapshot, &id, 100).unwrap().unwrap(),
        b"whole"
    );
    assert_eq!(
        store.get(Kind::Snapshot, &id, 2).unwrap().unwrap().len(),
        3,
        "one byte past the cap tells it"
    );
    for bad in [
        "../x",
        "sn_short",
        "sn_../../../../etc/passwd0000000000",
        "",
    ] {
        assert!(store.put(Kind::Snapshot, bad, b"x").is_err(), "{bad}");
        assert!(store.get(Kind::Snapshot, bad, 10).is_err(), "{bad}");
        assert!(store.put(Kind::Session, bad, b"x").is_err(), "{bad}");
    }
    assert!(
        store
            .get(Kind::Snapshot, &new_snapshot_id(), 10)
            .unwrap()
            .is_none()
    );
    let session = session_name("rt_someruntime");
    assert_eq!(session.len(), 64);
    assert!(
        store.put(Kind::Session, &id, b"x").is_err(),
        "a session is named by a hash"
    );
    store.put(Kind::Session, &session, b"asleep").unwrap();
    assert!(store.get(Kind::Snapshot, &session, 10).is_err());
    let listed = store.list(Kind::Session, 10).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, session);
    assert_eq!(store.list(Kind::Snapshot, 10).unwrap().len(), 1);
    store.delete(Kind::Snapshot, &id).unwrap();
    store.delete(Kind::Snapshot, &id).unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .collect();
    assert!(leftovers.is_empty());
    assert!(!redact(&id).contains(&id[7..]));
}

/// Each form of `snapshot_store` opens its store, anything else is refused by name.
#[test]
fn store_locations_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    assert!(matches!(Store::open("", dir.path()), Ok(Store::Dir(_))));
    assert!(matches!(
        Store::open(&format!("file://{data}/shared"), dir.path()),
        Ok(Store::Dir(_))
    ));
    assert!(matches!(
        Store::open(&format!("{data}/x"), dir.path()),
        Ok(Store::Dir(_))
    ));
    let err = Store::open("ftp://host/x", dir.path()).unwrap_err();
    assert!(err.contains("ftp://host/x"), "{err}");
    assert!(Store::open("relative/dir", dir.path()).is_err());
    assert!(Store::open("s3:///nobucket", dir.path()).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any bytes at all are refused cleanly (never a panic), and any change
    /// to a real snapshot is caught.
    #[test]
    fn random_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..2048), at in any::<usize>(), bit in 0u8..8) {
        let keys = Keys::of(Key::generate());
        prop_assert!(open(&bytes, &keys, ENGINE, IMAGE, BOUNDS).is_err());
        let mut sealed = seal(&contents(), keys.signing()).unwrap();
        let at = at % sealed.len();
        sealed[at] ^= 1 << bit;
        prop_assert!(open(&sealed, &keys, ENGINE, IMAGE, BOUNDS).is_err());
    }
}
