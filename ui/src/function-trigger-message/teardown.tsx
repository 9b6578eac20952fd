// code-runner::teardown: what was destroyed, and which function ids stopped resolving.

import { redactText } from "../lib/redact";
import { Card, Fact, Mono, Note, RuntimeChip, Section, record, text, type CallMessage, type Phase } from "../lib/shared";

/** The card of one `code-runner::teardown` call. */
export function TeardownCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const runtimeId = text(output.runtime_id) ?? text(input.runtime_id);
  const namespace = text(output.namespace) ?? text(input.namespace);
  const unregistered = Array.isArray(output.unregistered)
    ? output.unregistered.filter((id): id is string => typeof id === "string")
    : [];
  const done = props.phase === "done";
  const tornDown = output.torn_down === true;
  const tone = done ? (tornDown ? "ok" : "warn") : props.phase === "running" ? "running" : "pending";
  const verdict = done ? (tornDown ? "torn down" : "nothing torn down") : props.phase === "running" ? "tearing down…" : "not torn down yet";
  const canonical = namespace ? `${namespace.replace(/:+$/, "")}::` : null;

  return (
    <Card
      op="teardown"
      tone={tone}
      verdict={verdict}
      facts={<Fact>{runtimeId ? "by runtime_id" : canonical ? "by namespace" : "no target"}</Fact>}
    >
      <Section label={runtimeId ? "runtime" : "namespace"}>
        {runtimeId ? (
          <div className="cr-row">
            <RuntimeChip id={runtimeId} />
            {done && <span className="cr-row-text">this id now answers code-runner::expired</span>}
          </div>
        ) : canonical ? (
          <div className="cr-fn-id">{redactText(canonical)}</div>
        ) : (
          <Note tone="advice">
            Pass exactly one of <Mono>runtime_id</Mono> or <Mono>namespace</Mono>.
          </Note>
        )}
      </Section>
      {done && (
        <Section label="stopped resolving" aside={`${unregistered.length} function id${unregistered.length === 1 ? "" : "s"}`}>
          {unregistered.length > 0 ? (
            <ul className="cr-ids">
              {unregistered.map((id, i) => (
                <li key={i}>
                  <span className="cr-mono">{redactText(id)}</span>
                </li>
              ))}
            </ul>
          ) : (
            <p className="cr-quiet">
              none: {runtimeId ? "this runtime had registered no bus functions" : "no bus function was registered here"}, so no
              function id stopped resolving
            </p>
          )}
        </Section>
      )}
    </Card>
  );
}
