//! Issue 44, item 5: every escaping function is total over Unicode. Random
//! text (weighted toward what breaks emitters: quotes, backslashes, comment
//! ends, every line terminator, NUL and other controls, terminal escapes,
//! bidi and zero-width characters, any code point) goes through both
//! emitters as a description, a property's description and name, and an
//! enum value; every Python output passes the machine's `ast.parse` (one
//! `python3` for all cases) and every TypeScript output swc's parser, and
//! no output holds an invisible character raw.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use super::super::{Callable, DescribeLang, DescribeRequest, answer};
use super::*;

/// Characters that break emitters, and any character at all.
fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec![
            '"', '\'', '\\', '*', '/', '#', '`', '$', '{', '}', '\n', '\r', '\t', '\0', '\u{b}',
            '\u{c}', '\u{1b}', '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}', '\u{202e}',
            '\u{2066}', '\u{200b}', '\u{feff}', '\u{e0041}', '\u{fe0f}', '\u{d7ff}',
            '\u{10ffff}', 'é', '😀',
        ]),
        1 => any::<char>(),
        2 => prop::char::range('a', 'z'),
    ]
}

fn hostile_text() -> impl Strategy<Value = String> {
    prop::collection::vec(hostile_char(), 0..24).prop_map(|chars| chars.into_iter().collect())
}

/// One function whose every piece of published text is `text`.
fn callable(text: &str) -> Callable {
    let request = json!({
        "type": "object",
        "properties": {
            text: {"type": "string", "description": text},
            "plain": {"enum": [text, "x"], "description": text}
        },
        "required": ["plain"]
    });
    Callable {
        id: "app::greet".into(),
        description: Some(text.to_string()),
        request: Arc::new(request),
        response: Arc::new(json!({"enum": [text]})),
        remote: false,
    }
}

fn declarations(lang: DescribeLang, text: &str) -> String {
    let request = DescribeRequest {
        lang,
        query: None,
        function_ids: None,
    };
    answer(&request, &[callable(text)], BTreeMap::new()).declarations
}

/// Whether swc's TypeScript parser reads `source` without an error.
fn parses_as_typescript(source: &str) -> bool {
    use swc_common::BytePos;
    use swc_ecma_parser::lexer::Lexer;
    use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};
    let Ok(len) = u32::try_from(source.len()) else {
        return false;
    };
    let input = StringInput::new(source, BytePos(1), BytePos(1 + len));
    let syntax = Syntax::Typescript(TsSyntax {
        dts: true,
        ..TsSyntax::default()
    });
    let lexer = Lexer::new(syntax, swc_ecma_ast::EsVersion::latest(), input, None);
    let mut parser = Parser::new_from(lexer);
    parser.parse_module().is_ok() && parser.take_errors().is_empty()
}

/// Whether `text` holds a character that does not show as itself.
fn holds_invisible(text: &str) -> bool {
    text.chars().any(|c| c != '\n' && !visible(c))
}

#[test]
fn random_text_through_both_emitters_parses() {
    let mut runner = TestRunner::deterministic();
    let mut python = Vec::new();
    for case in 0..400 {
        let text = hostile_text()
            .new_tree(&mut runner)
            .expect("a case")
            .current();
        let ts = declarations(DescribeLang::Typescript, &text);
        assert!(
            parses_as_typescript(&ts),
            "case {case}: {text:?} gave TypeScript swc refuses:\n{ts}"
        );
        assert!(!holds_invisible(&ts), "case {case}: {text:?}:\n{ts}");
        let py = declarations(DescribeLang::Python, &text);
        assert!(!holds_invisible(&py), "case {case}: {text:?}:\n{py}");
        python.push(Value::String(py));
    }
    // One interpreter for every case: the machine's python3 (a README
    // prerequisite), its `ast.parse`.
    let script = "import ast, json, sys\nbad = []\nfor i, src in enumerate(json.load(sys.stdin)):\n    try:\n        ast.parse(src)\n    except Exception as e:\n        bad.append([i, repr(e)])\nprint(json.dumps(bad))\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (a README prerequisite)");
    let input = serde_json::to_vec(&python).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let bad: Vec<(usize, String)> = serde_json::from_slice(&out.stdout).expect("python3's report");
    if let Some((i, why)) = bad.first() {
        panic!(
            "{} of 400 stubs do not parse; the first, case {i} ({why}):\n{}",
            bad.len(),
            python[*i].as_str().unwrap_or_default()
        );
    }
}

/// The review's cases: a NUL makes a docstring an escape, not a byte that
/// stops Python reading the stubs; ESC and a bidi override show as escapes.
#[test]
fn nul_escape_and_bidi_become_escapes() {
    assert_eq!(
        py_docstring("a\0b\u{1b}[31m", ""),
        "\"\"\"a\\x00b\\x1b[31m\"\"\""
    );
    assert_eq!(py_string("x\u{202e}y"), "\"x\\u202ey\"");
    assert_eq!(py_comment("a\u{2028}b\u{e0041}"), "a b\\U000e0041");
    assert_eq!(ts_string("x\u{202e}\"y"), "\"x\\u{202e}\\\"y\"");
    assert_eq!(ts_comment_line("end */ \u{1b}]0;t"), "end *\\/ \\u{1b}]0;t");
}
