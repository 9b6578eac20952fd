// The decision on a suspended run: the call it waits on, an optional reason,
// and Approve / Deny, which call code-runner::resume. The runtime and call ids
// stay in this component's closure, never in the DOM.

import { useState } from "react";
import { suspendedCall } from "../function-trigger-message/suspended";
import { redactText } from "../lib/redact";
import { record, text } from "../lib/shared";

/** The server's bound on a reason (bytes; a longer one is refused with a clear error). */
const MAX_REASON_CHARS = 1024;

/** What code-runner::resume is called with. */
export interface ResumeInput {
  runtime_id: string;
  call_id: string;
  approve: boolean;
  reason?: string;
}

/** The resume request for `output` (a run's or a resume's answer), or null when it does not wait. */
export function resumable(output: unknown): Omit<ResumeInput, "approve" | "reason"> | null {
  const fields = record(output);
  const call = suspendedCall(fields);
  const runtimeId = text(fields.runtime_id);
  if (!call || !runtimeId || call.callId === "") return null;
  return { runtime_id: runtimeId, call_id: call.callId };
}

/** Approve or Deny for one suspended answer; once decided, says which. */
export function Approval(props: {
  output: unknown;
  decided?: "approved" | "denied";
  onDecide(input: ResumeInput): void;
}) {
  const [reason, setReason] = useState("");
  const target = resumable(props.output);
  const call = suspendedCall(record(props.output));
  if (!target || !call) return null;
  const decide = (approve: boolean) => {
    const input: ResumeInput = { ...target, approve };
    if (reason.trim() !== "") input.reason = reason;
    props.onDecide(input);
  };
  if (props.decided) {
    return (
      <div className="pg-approval" aria-label="approval">
        <span>
          <span className="pg-approval-title">{props.decided}</span>: {redactText(call.functionId)}
        </span>
      </div>
    );
  }
  return (
    <div className="pg-approval" role="group" aria-label="approval">
      <span className="pg-approval-title">
        <span className="pg-fn">{redactText(call.functionId)}</span> waits for your approval
      </span>
      <label className="pg-field-inline pg-approval-reason">
        reason (optional)
        <input value={reason} maxLength={MAX_REASON_CHARS} onChange={(event) => setReason(event.target.value)} spellCheck={false} />
      </label>
      <div className="pg-actions">
        <button type="button" className="pg-primary" onClick={() => decide(true)}>
          Approve
        </button>
        <button type="button" onClick={() => decide(false)}>
          Deny
        </button>
      </div>
    </div>
  );
}
