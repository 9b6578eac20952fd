//! Property tests of the nesting guard against swc's own parser: programs
//! that mix nesting with the lexical material the guard must read as swc
//! does (comments ended by every line terminator, strings with every escape
//! and continuation, regular expressions and divisions after every kind of
//! token, templates, keywords as property names, `<` and type arguments).
//! Whenever swc's syntax tree nests deeper than the guard's limit, the
//! guard refuses. Small limits keep each case small: the guard counts the
//! same way at any limit.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use swc_common::BytePos;
use swc_ecma_ast::{EsVersion, Expr, Pat, Stmt, TsType};
use swc_ecma_parser::lexer::Lexer;
use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};
use swc_ecma_visit::{Visit, VisitWith};

use super::guard::within;

/// The deepest path of expressions, statements, types and patterns in a tree.
#[derive(Default)]
struct Depth {
    now: usize,
    max: usize,
}

macro_rules! levels {
    ($($visit:ident: $node:ty),*) => {$(
        fn $visit(&mut self, node: &$node) {
            self.now += 1;
            self.max = self.max.max(self.now);
            node.visit_children_with(self);
            self.now -= 1;
        }
    )*};
}

impl Visit for Depth {
    levels!(visit_expr: Expr, visit_stmt: Stmt, visit_ts_type: TsType, visit_pat: Pat);
}

/// How deep swc's tree of `source` (a module) nests; `None` if it does not parse.
fn swc_depth(source: &str) -> Option<usize> {
    let end = BytePos(1 + u32::try_from(source.len()).ok()?);
    let input = StringInput::new(source, BytePos(1), end);
    let lexer = Lexer::new(
        Syntax::Typescript(TsSyntax::default()),
        EsVersion::latest(),
        input,
        None,
    );
    let mut parser = Parser::new_from(lexer);
    let module = parser.parse_module().ok()?;
    if !parser.take_errors().is_empty() {
        return None;
    }
    let mut depth = Depth::default();
    module.visit_with(&mut depth);
    Some(depth.max)
}

/// What may stand between two tokens: white space, every line terminator,
/// and comments holding brackets, ended by each line terminator.
fn trivia() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        " ",
        " ",
        " ",
        "\n",
        "\r",
        "\r\n",
        "\u{2028}",
        "\u{2029}",
        "\t",
        "\u{a0}",
        "\u{b}",
        "\u{c}",
        "\u{feff}",
        "\u{3000}",
        "/* ( [ { */",
        "/* (\n[ */",
        "// ( [ {\n",
        "// ( [ {\r",
        "// ( [\u{2028}",
        "// ( [\u{2029}",
        "// ( [\r\n",
    ])
}

/// Leaves: names, literals with every escape, regular expressions with brackets.
fn leaf() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "x",
        "1",
        "this",
        "a.return",
        "a?.typeof",
        "a.if",
        "b.new",
        "y!",
        "\"s((\"",
        "'q[['",
        "\"a\\\r\n((\"",
        "'b\\\n(('",
        "\"\\\"((\"",
        "'\\u{2028}(('",
        "\"\u{2028}((\"",
        "/re[(/]/g",
        "/\\/((/",
        "/[\"(]/",
        "`t((`",
        "`\\`((`",
        "0x1F",
        "1.5e3",
        "f<A<B>>()",
    ])
    .prop_map(str::to_string)
}

/// An expression nesting `inner`, with trivia `t` between its tokens.
fn nest(inner: String, other: String, t: &str, shape: usize) -> String {
    match shape {
        0 => format!("({t}{inner}{t})"),
        1 => format!("[{t}{inner}{t}]"),
        2 => format!("({{a:{t}{inner}{t}}})"),
        3 => format!("!{t}{inner}"),
        4 => format!("typeof{t} {inner}"),
        5 => format!("{inner}{t}+{t}{other}"),
        6 => format!("{inner}{t}/ {t}{other}"),
        7 => format!("{other}{t}?{t}{inner}{t}:{t}{other}"),
        8 => format!("f({t}{inner}{t})"),
        9 => format!("`(${{{t}{inner}{t}}}(`"),
        10 => format!("(({t}x{t}) =>{t}{inner})"),
        11 => format!("new C({t}{inner}{t})"),
        12 => format!("(({inner}) as{t}T<U<V>>)"),
        13 => format!("x++{t}/ {t}({inner})"),
        14 => format!("x--{t}/ {t}({inner})"),
        15 => format!("y!{t}/ {t}({inner})"),
        16 => format!("a.return{t}/ {t}({inner})"),
        17 => format!("(<T>(x: T) =>{t}{inner})"),
        18 => format!("{other}{t}<{t}-({inner})"),
        19 => format!("{inner}{t}.b"),
        20 => format!("(/[(]/{t}.test({inner}))"),
        21 => format!("{other}[{t}{inner}{t}]"),
        _ => format!("(({inner}) satisfies{t}A<[B]>)"),
    }
}

/// Statements nesting `inner` (an expression, or a statement when `block`).
fn statement(inner: String, t: &str, shape: usize) -> String {
    match shape {
        0 => format!("x = {inner};"),
        1 => format!("if ({t}a{t}){t}{{{t}x = {inner}{t}}}"),
        2 => format!("if ({t}a{t}){t}/\"/.test({inner});"),
        3 => format!("while ({t}{inner}{t}){t}{{}}"),
        4 => format!("{{{t}x = {inner}{t}}}"),
        5 => format!("v = ({inner}) as A<{t}B<C>{t}>;"),
        _ => format!("g = function () {{{t}return {inner}{t}}}"),
    }
}

/// A statement nesting `inner` (a statement), with trivia `t`.
fn compound(inner: String, t: &str, shape: usize) -> String {
    match shape {
        0 => format!("if ({t}a{t}){t}{inner}"),
        1 => format!("{{{t}{inner}{t}}}"),
        2 => format!("while (a){t}{inner}"),
        3 => format!("switch (a) {{{t}case 1:{t}{inner}{t}}}"),
        4 => format!("if (a) {{}} else{t}{inner}"),
        5 => format!("for (;;){t}{inner}"),
        _ => format!("do{t}{inner}{t}while (a)"),
    }
}

fn program() -> impl Strategy<Value = String> {
    let expression = leaf().prop_recursive(32, 32, 1, |inner| {
        (inner, leaf(), trivia(), 0..23usize)
            .prop_map(|(inner, other, t, shape)| nest(inner, other, t, shape))
    });
    let simple = (expression, trivia(), 0..7usize).prop_map(|(e, t, shape)| statement(e, t, shape));
    let nested = simple.prop_recursive(12, 12, 1, |inner| {
        (inner, trivia(), 0..7usize).prop_map(|(inner, t, shape)| compound(inner, t, shape))
    });
    prop::collection::vec(nested, 1..4).prop_map(|parts| parts.join("\n"))
}

/// Whenever swc nests deeper than the limit, the guard refuses. At least a
/// quarter of the programs that parse go past the limit, so the property is
/// not vacuous.
#[test]
fn the_guard_refuses_what_swc_nests_too_deep() {
    const LIMIT: usize = 16;
    // swc recurses: a thread of its own with a stack for any case here.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let mut runner = TestRunner::new(Config {
                cases: 10_000,
                failure_persistence: None,
                ..Config::default()
            });
            let tally = std::cell::Cell::new((0usize, 0usize)); // (parsed, deeper than the limit)
            runner
                .run(&program(), |source| {
                    let Some(depth) = swc_depth(&source) else {
                        return Ok(());
                    };
                    let (parsed, deep) = tally.get();
                    tally.set((parsed + 1, deep + usize::from(depth > LIMIT)));
                    if depth > LIMIT && within(&source, LIMIT).is_ok() {
                        return Err(TestCaseError::fail(format!(
                            "swc nests {depth} deep, the guard let it through: {source:?}"
                        )));
                    }
                    Ok(())
                })
                .unwrap();
            let (parsed, deep) = tally.get();
            assert!(parsed >= 3_000 && deep * 4 >= parsed, "{deep} of {parsed}");
        })
        .unwrap()
        .join()
        .unwrap();
}
