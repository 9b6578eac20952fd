//! Static `import` lines in turn code. A program is the body of an async
//! function, where `import … from` is a syntax error; agents write it at
//! the top of their code constantly. This rewrites each top-level import
//! declaration into `await import(…)` and `const` bindings, in JavaScript
//! and TypeScript alike (type-only imports are dropped), so every line
//! keeps its number: the hoisted code takes the first declaration's place,
//! on its first line, and every declaration's text becomes blank lines.
//!
//! swc parses the program as a module (a top-level `return` is tolerated:
//! it is recoverable there), on the strip's stack after its nesting guard,
//! so no source can overflow the parser. A program that does not parse is
//! left as it is: V8 or the strip reports its error as before.
//!
//! A named import takes the module's export, else (a CommonJS package,
//! whose namespace is `default` alone) the property of its `default`, else
//! throws the SyntaxError V8 would at link time.

use swc_common::sync::Lrc;
use swc_common::{FileName, GLOBALS, Globals, SourceMap, Spanned};
use swc_ecma_ast::{ImportSpecifier, ModuleDecl, ModuleExportName, ModuleItem};
use swc_ecma_parser::{EsSyntax, Syntax, TsSyntax};

/// The global helper a named import calls (the bootstrap defines it).
const BINDING_HELPER: &str = "globalThis[Symbol.for(\"code-runner.binding\")]";

/// `source` with its top-level import declarations rewritten, or `None`
/// when it has none (or does not parse).
pub fn hoist(source: &str, typescript: bool) -> Option<String> {
    if !source.contains("import") {
        return None;
    }
    crate::strip::guard(source).ok()?;
    let text = source.to_string();
    crate::strip::run_on_stack(source.len(), move || {
        GLOBALS.set(&Globals::new(), || rewrite(&text, typescript))
    })
    .flatten()
}

fn rewrite(source: &str, typescript: bool) -> Option<String> {
    let cm: Lrc<SourceMap> = Lrc::default();
    let file = cm.new_source_file(Lrc::new(FileName::Anon), source.to_string());
    let syntax = if typescript {
        Syntax::Typescript(TsSyntax::default())
    } else {
        Syntax::Es(EsSyntax {
            allow_return_outside_function: true,
            ..EsSyntax::default()
        })
    };
    let mut recovered = Vec::new();
    let module = swc_ecma_parser::parse_file_as_module(
        &file,
        syntax,
        swc_ecma_ast::EsVersion::latest(),
        None,
        &mut recovered,
    )
    .ok()?;
    let base = file.start_pos.0;
    let at = |pos: swc_common::BytePos| (pos.0 - base) as usize;
    let mut spans = Vec::new();
    let mut hoisted = String::new();
    for item in &module.body {
        let ModuleItem::ModuleDecl(ModuleDecl::Import(decl)) = item else {
            continue;
        };
        let (lo, hi) = (at(decl.span.lo), at(decl.span.hi));
        spans.push((lo, hi));
        if decl.type_only {
            continue;
        }
        let n = spans.len() - 1;
        let namespace = format!("__code_runner_import_{n}__");
        let specifier = source.get(at(decl.src.span.lo)..at(decl.src.span.hi))?;
        let options = match &decl.with {
            Some(with) => {
                let span = with.span();
                format!(", {{ with: {} }}", source.get(at(span.lo)..at(span.hi))?)
            }
            None => String::new(),
        };
        hoisted.push_str(&format!(
            "const {namespace} = await import({specifier}{options}); "
        ));
        for binding in &decl.specifiers {
            let line = match binding {
                ImportSpecifier::Default(default) => {
                    format!("const {} = {namespace}.default; ", default.local.sym)
                }
                ImportSpecifier::Namespace(all) => {
                    format!("const {} = {namespace}; ", all.local.sym)
                }
                ImportSpecifier::Named(named) if named.is_type_only => continue,
                ImportSpecifier::Named(named) => {
                    let name = match &named.imported {
                        Some(ModuleExportName::Ident(ident)) => {
                            serde_json::to_string(&*ident.sym).ok()?
                        }
                        Some(ModuleExportName::Str(text)) => {
                            source.get(at(text.span.lo)..at(text.span.hi))?.to_string()
                        }
                        None => serde_json::to_string(&*named.local.sym).ok()?,
                    };
                    format!(
                        "const {} = {BINDING_HELPER}({namespace}, {name}, {specifier}); ",
                        named.local.sym
                    )
                }
            };
            hoisted.push_str(&line);
        }
    }
    let (first, _) = *spans.first()?;
    let mut out = String::with_capacity(source.len() + hoisted.len());
    let mut cursor = 0;
    for (lo, hi) in spans {
        out.push_str(source.get(cursor..lo)?);
        if lo == first {
            out.push_str(&hoisted);
        }
        // The declaration's lines stay, blank.
        out.extend(source.get(lo..hi)?.chars().filter(|c| *c == '\n'));
        cursor = hi;
    }
    out.push_str(source.get(cursor..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form of import becomes awaited imports and bindings, lines kept.
    #[test]
    fn imports_become_awaited_imports_with_their_lines_kept() {
        let source = "import a, { b, c as d } from 'm';\nimport * as ns from \"n\";\nimport 'side';\nreturn a + b;\n";
        let out = hoist(source, false).expect("rewritten");
        assert_eq!(out.lines().count(), source.lines().count());
        assert!(out.contains("await import('m')"), "{out}");
        assert!(
            out.contains("const a = __code_runner_import_0__.default"),
            "{out}"
        );
        assert!(
            out.contains("(__code_runner_import_0__, \"c\", 'm')"),
            "{out}"
        );
        assert!(out.contains("const d = "), "{out}");
        assert!(
            out.contains("const ns = __code_runner_import_1__;"),
            "{out}"
        );
        assert!(out.contains("await import('side')"), "{out}");
        assert_eq!(out.lines().nth(3), Some("return a + b;"));
    }

    /// TypeScript's type-only imports go; attributes stay; no import, no rewrite.
    #[test]
    fn typescript_type_imports_are_dropped() {
        let source = "import type { T } from 't';\nimport { type U, v } from 'u';\nimport data from './d.json' with { type: 'json' };\nconst x: T = v;\nreturn x;";
        let out = hoist(source, true).expect("rewritten");
        assert!(!out.contains("'t'"), "{out}");
        assert!(!out.contains("const U"), "{out}");
        assert!(out.contains("const v = "), "{out}");
        assert!(
            out.contains("import('./d.json', { with: { type: 'json' } })"),
            "{out}"
        );
        assert_eq!(out.lines().count(), source.lines().count());
        assert_eq!(hoist("return import('x')", false), None);
        assert_eq!(hoist("return 1 +", false), None);
    }
}
