// code-runner::register_function: the id, the namespace it claims, the handler.

import { isLang, type Lang } from "../lib/highlight";
import { redactText } from "../lib/redact";
import { Card, CodeBlock, Fact, Mono, Note, Section, record, text, type CallMessage, type Phase } from "../lib/shared";

/** The namespace a function id claims: the part before the first `::`, or null. */
export function namespaceOf(functionId: string): string | null {
  const at = functionId.indexOf("::");
  return at > 0 ? functionId.slice(0, at) : null;
}

/** Whether `namespace` is shaped like a plain runtime's own (its `iii.namespace`: `rt-` and 20 lower-case letters and digits, crates/code-runner/src/ids.rs). */
export function isRuntimesOwn(namespace: string): boolean {
  return /^rt-[a-z0-9]{20}$/.test(namespace);
}

const HANDLER: Record<Lang, RegExp> = {
  python: /^(?:async\s+)?def\s+handler\s*\(|^handler\s*(?::[^=\n]*)?=/m,
  node: /\b(?:async\s+)?function\s*\*?\s*handler\s*\(|\b(?:const|let|var)\s+handler\s*=|\bexport\s*\{[^}]*\bhandler\b[^}]*\}|\bexport\s+default\s+(?:async\b|function\b|\()/,
  typescript: /\b(?:async\s+)?function\s*\*?\s*handler\s*(?:<[^>\n]*>\s*)?\(|\b(?:const|let|var)\s+handler\s*(?::[^=\n]*)?=|\bexport\s*\{[^}]*\bhandler\b[^}]*\}|\bexport\s+default\s+(?:async\b|function\b|\()/,
};

/** Whether `source` visibly defines the handler `lang` needs (a top-level `def handler` / a `handler` binding or a default export that is a function). */
export function definesHandler(source: string, lang: Lang): boolean {
  return HANDLER[lang].test(source);
}

function HandlerAdvice(props: { lang: Lang }) {
  return props.lang === "python" ? (
    <Note tone="advice">
      This source defines no top-level <Mono>handler(payload)</Mono>. On python that fails the
      registration itself, not the first call: add <Mono>def handler(payload): …</Mono> and return a JSON value.
    </Note>
  ) : (
    <Note tone="advice">
      This source defines no <Mono>handler</Mono>. {props.lang === "typescript" ? "TypeScript loads it (its types stripped)" : "Node loads it"} as an ES module, so write{" "}
      <Mono>export function handler(payload) {"{ … }"}</Mono> (it may be async; <Mono>function handler</Mono> and{" "}
      <Mono>export default function</Mono> work too).
    </Note>
  );
}

/** The card of one `code-runner::register_function` call. */
export function RegisterFunctionCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const functionId = text(output.function_id) ?? text(input.function_id) ?? "";
  const lang = isLang(input.lang) ? input.lang : null;
  const source = text(input.source) ?? "";
  const description = text(input.description);
  const namespace = namespaceOf(functionId);
  const done = props.phase === "done";
  const registered = output.registered === true;
  const tone = done ? (registered ? "ok" : "warn") : props.phase === "running" ? "running" : "pending";
  const verdict = done ? (registered ? "registered" : "not registered") : props.phase === "running" ? "registering…" : "not registered yet";
  const schemas = ["request_format", "response_format"].filter((key) => input[key] != null);

  return (
    <Card op="register_function" tone={tone} verdict={verdict} facts={lang && <Fact>{lang}</Fact>}>
      <Section label="function">
        <div className="cr-fn-id">{redactText(functionId)}</div>
        {namespace ? (
          <div className="cr-namespace">
            claims namespace <Mono>{redactText(namespace)}::</Mono>
            <span className="cr-namespace-text">
              one {lang ?? "language"} runtime backs every function under it; teardown with{" "}
              <Mono>{`namespace: "${redactText(namespace)}"`}</Mono> removes them all
            </span>
          </div>
        ) : (
          <Note tone="advice">
            This id has no <Mono>::</Mono>, so it claims no namespace: write it as <Mono>app::name</Mono>.
          </Note>
        )}
        {namespace && isRuntimesOwn(namespace) && (
          <Note>
            <Mono>{redactText(namespace)}::</Mono> looks like a run's own namespace (its <Mono>iii.namespace</Mono>): while
            that runtime lives, only guest code of its run's tree may register here (host calls are refused too);
            what it registers stays after the runtime ends, like any namespace guest code registers.
          </Note>
        )}
        {description && <p className="cr-description">{redactText(description)}</p>}
      </Section>
      {lang && !definesHandler(source, lang) && <HandlerAdvice lang={lang} />}
      <Section label="source" aside={schemas.length > 0 ? `with ${schemas.join(" and ")}` : lang ?? undefined}>
        <CodeBlock code={source} lang={lang} />
      </Section>
    </Card>
  );
}
