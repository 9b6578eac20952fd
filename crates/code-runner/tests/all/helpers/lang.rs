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

/// The configurations of both python interpreters, for the tests of what
/// differs between them (the raw binding channel, the turn's end): the data
/// stack first (`scripts/test` installs it), then the lean interpreter.
pub const PYTHON_INTERPRETERS: [&str; 2] =
    ["python_interpreter: data\n", "python_interpreter: lean\n"];

/// Python that binds `raw(frame)` to the interpreter's raw binding channel,
/// whichever it is: the lean one's `wit_world.call` (JSON text in and out),
/// the data flavour's door (`_host.call` with a `C` frame, bytes).
pub const RAW_BINDING_CALL: &str = concat!(
    "try:\n",
    "    from wit_world import call as raw\n",
    "except ImportError:\n",
    "    import _host\n",
    "    def raw(frame):\n",
    "        return _host.call(('C' + frame).encode()).decode()\n",
);
