// What `code-runner::run` answers, drawn the same on the run card and the
// resume card (resume answers as run does): the verdict, the value or the
// call the run waits on, the images, and the output.

import type { Lang } from "../lib/highlight";
import { omission, splitStream, type Stream } from "../lib/markers";
import { formatBytes } from "./files";
import {
  Images,
  Mono,
  Note,
  OmittedValue,
  Section,
  Terminal,
  ValueView,
  count,
  formatDuration,
  kindOf,
  record,
  text,
  type Phase,
  type Tone,
} from "../lib/shared";
import { Suspended, suspendedCall } from "./suspended";

function NullResult(props: { lang: Lang | null; exitCode: number }) {
  if (props.exitCode !== 0) {
    return (
      <Note>
        The program ended with exit {props.exitCode}, so there is no value; stderr says why.
      </Note>
    );
  }
  const python = (
    <>
      python code is a module: it returns a value by assigning <Mono>result = …</Mono>
    </>
  );
  const node = (
    <>
      {props.lang === "typescript" ? "typescript" : "node"} code is an async function body: it returns a value with{" "}
      <Mono>return …</Mono>
    </>
  );
  return (
    <Note>
      {props.lang === "python" ? python : props.lang !== null ? node : <>{python}; {node}</>}. A value
      JSON cannot represent also comes back as null.
    </Note>
  );
}

/** The label beside a stream the worker cut, or nothing. */
function cutNote(text: string, stream: Stream): string | undefined {
  const marker = splitStream(text, stream).find((segment) => segment.kind === "truncated");
  return marker?.kind === "truncated" ? `cut by the worker: was ~${marker.kb} KB, middle omitted` : undefined;
}

/** The quiet line under the verdict: what the run cost, as the sandbox measured it. */
function usageLine(usage: unknown) {
  const fields = record(usage);
  const cpu = typeof fields.cpu_ms === "number" ? fields.cpu_ms : undefined;
  const peak = count(fields.peak_memory_bytes);
  if (cpu === undefined && peak === undefined) return null;
  const parts = [
    cpu !== undefined ? `cpu ${cpu < 1 ? cpu.toFixed(2) : formatDuration(cpu)}${cpu < 1 ? " ms" : ""}` : null,
    peak !== undefined ? `peak ${formatBytes(peak)}` : null,
  ].filter((part) => part !== null);
  return (
    <span className="cr-verdict-usage" title="what the run cost, as the sandbox measured it">
      {parts.join(" · ")}
    </span>
  );
}

/** The header's tone and verdict for an answer in `phase`; `waiting` for a suspended run. */
export function answerVerdict(output: Record<string, unknown>, phase: Phase, durationMs: number | undefined, running = "running…") {
  const exitCode = count(output.exit_code) ?? 0;
  const duration = count(output.duration_ms) ?? durationMs;
  const after = duration !== undefined && <span className="cr-verdict-sub"> · {formatDuration(duration)}</span>;
  if (phase !== "done") {
    return { tone: (phase === "running" ? "running" : "pending") as Tone, verdict: phase === "running" ? running : "not run yet" };
  }
  if (suspendedCall(output)) {
    return {
      tone: "waiting" as Tone,
      verdict: (
        <>
          waiting for approval
          {after}
        </>
      ),
    };
  }
  return {
    tone: (exitCode === 0 ? "ok" : "warn") as Tone,
    verdict: (
      <>
        exit {exitCode}
        {after}
        {usageLine(output.usage)}
      </>
    ),
  };
}

/** The value a run returned, or the call it waits on when it is suspended; then its images. */
export function AnswerValue(props: { output: Record<string, unknown>; lang: Lang | null }) {
  const call = suspendedCall(props.output);
  if (call) return <Suspended call={call} />;
  const result = props.output.result;
  const omitted = omission(result);
  const exitCode = count(props.output.exit_code) ?? 0;
  return (
    <>
      <Section label="result" aside={omitted ? "omitted by the worker" : kindOf(result ?? null)} flag={omitted !== null}>
        {omitted ? (
          <OmittedValue omission={omitted} />
        ) : result === null || result === undefined ? (
          <>
            <ValueView value={null} />
            <NullResult lang={props.lang} exitCode={exitCode} />
          </>
        ) : (
          <ValueView value={result} />
        )}
      </Section>
      <Images images={props.output.images} />
    </>
  );
}

/** stdout and stderr (of a suspended run: so far), or a quiet line when both are empty. */
export function AnswerStreams(props: { output: Record<string, unknown> }) {
  const stdout = text(props.output.stdout) ?? "";
  const stderr = text(props.output.stderr) ?? "";
  const sofar = suspendedCall(props.output) ? "so far" : undefined;
  if (stdout === "" && stderr === "") return <p className="cr-quiet">nothing on stdout or stderr{sofar ? " so far" : ""}</p>;
  return (
    <>
      {stdout !== "" && (
        <Section label="stdout" aside={cutNote(stdout, "stdout") ?? sofar} flag={cutNote(stdout, "stdout") !== undefined}>
          <Terminal stream="stdout" text={stdout} />
        </Section>
      )}
      {stderr !== "" && (
        <Section label="stderr" aside={cutNote(stderr, "stderr") ?? sofar} flag={cutNote(stderr, "stderr") !== undefined}>
          <Terminal stream="stderr" text={stderr} />
        </Section>
      )}
    </>
  );
}
