//! The path rules, the globs, the walk that never follows a symlink, and
//! the caps that end a collected list.

use base64::Engine as _;
use proptest::prelude::*;

use super::beneath::{self, open_root};
use super::collect::mime_type;
use super::*;
use crate::ErrorCode;
use crate::wire::FileInput;

fn text(path: &str, text: &str) -> FileInput {
    FileInput {
        path: path.into(),
        text: Some(text.into()),
        base64: None,
    }
}

/// Each rule refuses its path with `invalid_request`, naming the path.
#[test]
fn bad_paths_are_refused_by_name() {
    let long = "x".repeat(256);
    let deep = vec!["abcdefgh"; 120].join("/");
    for (bad, rule) in [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("a/../b", "`..`"),
        ("..", "`..`"),
        ("a\0b", "NUL"),
        ("a//b", "empty component"),
        ("a/", "empty component"),
        (".", "not the root"),
        (long.as_str(), "255 bytes"),
        (deep.as_str(), "1024 bytes"),
    ] {
        let err = normalise(bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad:?}");
        assert!(err.message.contains(rule), "{bad:?}: {}", err.message);
        assert!(err.message.contains("file path"), "{}", err.message);
    }
    assert_eq!(normalise("a/./b").unwrap(), "a/b");
    assert_eq!(normalise("./data/in.csv").unwrap(), "data/in.csv");
    assert_eq!(normalise("..hidden").unwrap(), "..hidden");
}

/// Duplicates (after normalisation), a file that is another's directory,
/// both or neither of text/base64, bad base64 and too many files are refused.
#[test]
fn inputs_are_decoded_and_checked() {
    let files = decode_inputs(vec![
        text("a/./b.txt", "hi"),
        FileInput {
            path: "bin".into(),
            text: None,
            base64: Some("AAH/".into()),
        },
    ])
    .unwrap();
    assert_eq!(files[0].path, "a/b.txt");
    assert_eq!(files[1].bytes, vec![0, 1, 255]);
    let refused = |files: Vec<FileInput>, rule: &str| {
        let err = decode_inputs(files).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.contains(rule), "{}", err.message);
    };
    refused(vec![text("a/b", "1"), text("a/./b", "2")], "two files");
    refused(vec![text("a", "1"), text("a/b", "2")], "directory");
    let both = FileInput {
        path: "x".into(),
        text: Some("1".into()),
        base64: Some("MQ==".into()),
    };
    refused(vec![both], "exactly one");
    let neither = FileInput {
        path: "x".into(),
        text: None,
        base64: None,
    };
    refused(vec![neither], "exactly one");
    let bad = FileInput {
        path: "x".into(),
        text: None,
        base64: Some("!!".into()),
    };
    refused(vec![bad], "base64");
    let many = (0..=path::MAX_INPUT_FILES)
        .map(|i| text(&format!("f{i}"), ""))
        .collect();
    refused(many, "at most 256 files");
}

proptest! {
    /// Normalising is idempotent; a normal path has no `.`/`..`/empty
    /// component, is relative and within the bounds.
    #[test]
    fn normalise_is_idempotent_and_safe(parts in prop::collection::vec(
        prop_oneof![Just(".".to_string()), Just("..".to_string()), Just(String::new()), "[a-z.\\-]{1,12}"],
        0..8,
    ), lead in prop::bool::ANY) {
        let raw = format!("{}{}", if lead { "/" } else { "" }, parts.join("/"));
        if let Ok(normal) = normalise(&raw) {
            prop_assert_eq!(normalise(&normal).unwrap(), normal.clone());
            prop_assert!(!normal.starts_with('/'));
            prop_assert!(normal.len() <= path::MAX_PATH_BYTES);
            for part in normal.split('/') {
                prop_assert!(!part.is_empty() && part != "." && part != "..", "{normal}");
            }
            prop_assert!(!lead && !parts.iter().any(|p| p == ".." || p.is_empty()));
        }
    }
}

/// `*` stays in its directory, `**` crosses them; bad globs are refused.
#[test]
fn globs_match_like_a_shell() {
    let globs = Globs::new(&["out/*.csv".into(), "**/*.png".into(), "report.md".into()]).unwrap();
    for yes in ["out/a.csv", "a.png", "x/y/z.png", "report.md"] {
        assert!(globs.matches(yes), "{yes}");
    }
    for no in ["out/sub/a.csv", "a.csv", "x/report.md", "out/a.csvx"] {
        assert!(!globs.matches(no), "{no}");
    }
    for bad in ["", "/abs/*", "../x", "a/[", "a\0"] {
        let err = Globs::new(&[bad.to_string()]).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad:?}");
    }
}

fn write(root: &std::path::Path, path: &str, bytes: &[u8]) {
    beneath::write_file(&open_root(root).unwrap(), path, bytes).unwrap();
}

/// Sorted by path, with size and MIME type, binary bytes intact; a symlink
/// to a file or a directory outside the root is neither followed nor listed,
/// nor can a write go through one.
#[test]
fn collect_reads_by_descriptor_and_skips_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.csv"), b"secret").unwrap();
    let binary: Vec<u8> = (0..=255).collect();
    write(&root, "out/b.csv", b"b,c\n");
    write(&root, "out/a.bin", &binary);
    write(&root, "z.md", b"# z");
    std::os::unix::fs::symlink(outside.join("secret.csv"), root.join("out/link.csv")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("out/dir")).unwrap();
    let globs = Globs::new(&["**".into()]).unwrap();
    let files = collect(&root, &globs, CollectCaps::default()).inline();
    let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["out/a.bin", "out/b.csv", "z.md"]);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(files[0].base64.as_deref().unwrap())
        .unwrap();
    assert_eq!(decoded, binary);
    assert_eq!(
        (files[0].size, files[0].mime_type.as_str()),
        (256, "application/octet-stream")
    );
    assert_eq!(files[1].mime_type, "text/csv");
    let fd = open_root(&root).unwrap();
    assert!(beneath::write_file(&fd, "out/dir/planted", b"x").is_err());
    assert!(beneath::read_file(&fd, "out/link.csv", 100).is_err());
    assert!(!outside.join("planted").exists());
}

/// The count cap ends the list with a marker naming the cap and what was
/// left out; a file past the byte cap is skipped, named, and the list goes
/// on with the smaller files after it; a missing root collects nothing.
#[test]
fn caps_skip_or_end_and_the_marker_says_what() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        write(dir.path(), &format!("f{i}.txt"), &[b'x'; 30]);
    }
    let globs = Globs::new(&["*.txt".into()]).unwrap();
    let text = |file: &crate::CollectedFile| file.base64.clone().unwrap_or_default();
    let by_count = collect(
        dir.path(),
        &globs,
        CollectCaps {
            max_files: 2,
            max_bytes: 1 << 20,
        },
    )
    .inline();
    assert_eq!(by_count.len(), 3);
    let marker = &by_count[2];
    assert_eq!(
        (marker.path.as_str(), marker.mime_type.as_str(), marker.size),
        ("", "text/plain", 0)
    );
    assert!(
        text(marker).contains("3 more files (90 bytes)"),
        "{}",
        text(marker)
    );
    assert!(
        text(marker).contains("max_collect_files"),
        "{}",
        text(marker)
    );
    let by_bytes = collect(
        dir.path(),
        &globs,
        CollectCaps {
            max_files: 16,
            max_bytes: 100,
        },
    )
    .inline();
    assert_eq!(by_bytes.len(), 3, "40 base64 bytes each: two fit in 100");
    let marker = text(&by_bytes[2]);
    assert!(marker.contains("max_collect_bytes"), "{marker}");
    assert!(
        marker.contains("f2.txt (30 bytes), f3.txt (30 bytes), f4.txt (30 bytes) skipped"),
        "{marker}"
    );

    // One big file first: skipped, and the small ones after it still come.
    write(dir.path(), "a-big.txt", &[b'y'; 600]);
    let skipping = collect(
        dir.path(),
        &globs,
        CollectCaps {
            max_files: 16,
            max_bytes: 500,
        },
    )
    .inline();
    let paths: Vec<&str> = skipping.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", ""]
    );
    let marker = text(&skipping[5]);
    assert!(marker.contains("a-big.txt (600 bytes) skipped"), "{marker}");
    assert!(
        collect(&dir.path().join("none"), &globs, CollectCaps::default())
            .files
            .is_empty()
    );
}

/// New entries are counted once (shared directories too); growth is the
/// new size less the old.
#[test]
fn growth_counts_entries_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a/old.txt", &[0; 10]);
    let fd = open_root(dir.path()).unwrap();
    let (entries, bytes) =
        beneath::growth(&fd, [("a/old.txt", 15), ("b/c/new", 5), ("b/c/other", 1)]).unwrap();
    assert_eq!((entries, bytes), (4, 11), "b, b/c, b/c/new, b/c/other");
    assert!(
        beneath::growth(&fd, [("a/old.txt/x", 1)]).is_err(),
        "a file is not a directory"
    );
}

#[test]
fn mime_types_come_from_the_extension() {
    assert_eq!(mime_type("x.PNG"), "image/png");
    assert_eq!(mime_type("d/r.parquet"), "application/vnd.apache.parquet");
    assert_eq!(mime_type("noext"), "application/octet-stream");
}
