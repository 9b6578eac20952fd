// code-runner::run: the verdict first, then the value (or the call a suspended
// run waits on), the source, the output.

import { guessLang, isLang, type Lang } from "../lib/highlight";
import { AnswerStreams, AnswerValue, answerVerdict } from "./answer";
import { Files, formatBytes } from "./files";
import { suspendedCall } from "./suspended";
import {
  Card,
  CodeBlock,
  Fact,
  Note,
  RuntimeChip,
  Section,
  count,
  formatDuration,
  record,
  text,
  type CallMessage,
  type Phase,
} from "../lib/shared";

function langOf(input: Record<string, unknown>): { lang: Lang | null; guessed: boolean } {
  const said = input.lang;
  if (isLang(said)) return { lang: said, guessed: false };
  return { lang: guessLang(text(input.code) ?? ""), guessed: true };
}

export { formatBytes };

/** What the runtime section says about the runtime a run used or kept. */
function runtimeText(asked: boolean, done: boolean, suspended: boolean): string {
  if (suspended) return "the suspended run waits here: code-runner::resume takes this runtime_id with the call_id";
  if (asked) return "ran in this kept runtime";
  return done ? "kept: pass its runtime_id to run here again (globals and files stay); tear it down when done" : "";
}

/** The card of one `code-runner::run` call, in any phase. */
export function RunCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const code = text(input.code) ?? "";
  const { lang, guessed } = langOf(input);
  const askedRuntime = text(input.runtime_id);
  const keptRuntime = text(output.runtime_id) ?? askedRuntime;
  const done = props.phase === "done";
  const suspended = done && suspendedCall(output) !== null;
  const { tone, verdict } = answerVerdict(output, props.phase, props.message.durationMs);
  const mode = askedRuntime ? "in kept runtime" : input.keep === true ? "keep" : "one-shot";
  const timeout = count(input.timeout_ms);

  return (
    <Card
      op="run"
      tone={tone}
      verdict={verdict}
      facts={
        <>
          <Fact title={guessed ? "the call did not say; guessed from the code" : undefined}>
            {lang ?? "language?"}
            {guessed && lang ? "?" : ""}
          </Fact>
          <Fact>{mode}</Fact>
          {timeout !== undefined && <Fact>timeout {formatDuration(timeout)}</Fact>}
        </>
      }
    >
      {done && <AnswerValue output={output} lang={lang} />}
      <Files input={input} output={output} done={done} />
      {keptRuntime && (
        <Section label="runtime">
          <div className="cr-row">
            <RuntimeChip id={keptRuntime} />
            <span className="cr-row-text">{runtimeText(askedRuntime !== undefined, done, suspended)}</span>
          </div>
        </Section>
      )}
      {done && output.restored === true && (
        <Note>
          woken from hibernation: this session had been idle, so it was saved to the snapshot store and its slot freed; it was
          restored for this run as its last run left it.
        </Note>
      )}
      {done && input.keep === true && !askedRuntime && !text(output.runtime_id) && (
        <Note>keep was asked, but a run that fails is not kept: no runtime_id came back.</Note>
      )}
      <Section label="code" aside={lang ?? undefined}>
        <CodeBlock code={code} lang={lang} />
      </Section>
      {done && <AnswerStreams output={output} />}
    </Card>
  );
}
