// code-runner::resume: the decision on a suspended run's waiting call (the
// runtime and the call, both masked; approve or deny; the reason), then the
// answer, drawn as the run card draws it (resume answers as run does, or
// `suspended` again at the run's next such call).

import { redactText } from "../lib/redact";
import { AnswerStreams, AnswerValue, answerVerdict } from "./answer";
import { Files } from "./files";
import { Card, Fact, RuntimeChip, Section, record, text, type CallMessage, type Phase } from "../lib/shared";

/** The card of one `code-runner::resume` call, in any phase. */
export function ResumeCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const runtimeId = text(input.runtime_id);
  const callId = text(input.call_id);
  const approve = input.approve === true;
  const reason = text(input.reason);
  const done = props.phase === "done";
  const { tone, verdict } = answerVerdict(output, props.phase, props.message.durationMs, approve ? "approved, running…" : "denied, running…");

  return (
    <Card op="resume" tone={tone} verdict={verdict} facts={<Fact>{approve ? "approved" : "denied"}</Fact>}>
      <Section label="decision" aside={approve ? "the call proceeds" : "the code's call fails with the reason"}>
        <div className="cr-row">
          {runtimeId && <RuntimeChip id={runtimeId} />}
          {callId && <RuntimeChip id={callId} kind="call" />}
          <span className="cr-row-text cr-decision" data-cr-decision={approve ? "approve" : "deny"}>
            {approve ? "approve" : "deny"}
          </span>
        </div>
        {reason !== undefined && reason !== "" && <p className="cr-reason">reason: {redactText(reason)}</p>}
      </Section>
      {done && <AnswerValue output={output} lang={null} />}
      {done && <Files input={{}} output={output} done={done} />}
      {done && <AnswerStreams output={output} />}
    </Card>
  );
}
