//! The two languages, and the small programs a bilingual test writes in
//! each: python code is a module that assigns `result`, node code is the
//! body of an async function that returns its value.

/// Every wire `lang`, in the order bilingual tests run them.
pub const LANGS: [&str; 2] = ["python", "node"];

/// `python` or `node`, by wire `lang`.
pub fn pick<T>(lang: &str, python: T, node: T) -> T {
    match lang {
        "python" => python,
        "node" => node,
        other => panic!("no program for lang {other}"),
    }
}

/// A program whose value is 4.
pub fn two_plus_two(lang: &str) -> &'static str {
    pick(lang, "result = 2 + 2", "return 2 + 2")
}

/// A program whose value is `expression` (written the same in both languages).
pub fn returning(lang: &str, expression: &str) -> String {
    pick(
        lang,
        format!("result = {expression}"),
        format!("return {expression}"),
    )
}

/// A statement that creates the empty file `name` in the runtime's own
/// directory (python's `/work`, node's `iii.files`), so a test can find that
/// directory among pre-booted interpreters' empty ones.
pub fn mark(lang: &str, name: &str) -> String {
    pick(
        lang,
        format!("open('/work/{name}', 'w').close()\n"),
        format!("await iii.files.write('{name}', '');\n"),
    )
}
