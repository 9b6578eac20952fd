// A suspended run: its code called a function that waits for a person's
// approval (configuration `approval_required`, or register_function's
// `requires_approval`). The run answered `suspended {call_id, function_id,
// payload}` with its output so far, and `code-runner::resume` goes on with it.
// The call id is a capability (with the runtime id, it approves the call), so
// it is a masked chip like a runtime id.

import { redactText } from "../lib/redact";
import { Mono, Note, RuntimeChip, Section, ValueView, record, text } from "../lib/shared";

/** The call a suspended run waits on. */
export interface SuspendedCall {
  callId: string;
  functionId: string;
  payload: unknown;
}

/** The call `output` (a run's or a resume's answer) waits on, or null when it is not suspended. */
export function suspendedCall(output: Record<string, unknown>): SuspendedCall | null {
  const suspended = output.suspended;
  if (suspended === null || typeof suspended !== "object") return null;
  const fields = record(suspended);
  return {
    callId: text(fields.call_id) ?? "",
    functionId: text(fields.function_id) ?? "?",
    payload: fields.payload ?? null,
  };
}

/** The waiting call: the function it names, the payload it would be called with, its call id. */
export function Suspended(props: { call: SuspendedCall }) {
  const { call } = props;
  return (
    <Section label="waiting for approval" aside="the run is suspended" flag>
      <div className="cr-fn-id cr-waiting-fn">{redactText(call.functionId)}</div>
      <ValueView value={call.payload} />
      {call.callId !== "" && (
        <div className="cr-row">
          <RuntimeChip id={call.callId} kind="call" />
          <span className="cr-row-text">the call_id to pass to code-runner::resume with the runtime_id</span>
        </div>
      )}
      <Note>
        The code called <Mono>{redactText(call.functionId)}</Mono>, which needs a person's approval.{" "}
        <Mono>code-runner::resume</Mono> with <Mono>approve: true</Mono> lets the call proceed; with{" "}
        <Mono>false</Mono> the code's call fails with an error carrying the reason. Time waiting does not
        count against the timeout; the idle TTL ends a run no one resumes.
      </Note>
    </Section>
  );
}
