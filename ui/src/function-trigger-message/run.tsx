// code-runner::run: the verdict first, then the value, the source, the output.

import { guessLang, isLang, type Lang } from "../lib/highlight";
import { omission, splitStream, type Stream } from "../lib/markers";
import { Files, formatBytes } from "./files";
import {
  Card,
  CodeBlock,
  Fact,
  Images,
  Mono,
  Note,
  OmittedValue,
  RuntimeChip,
  Section,
  Terminal,
  ValueView,
  count,
  formatDuration,
  kindOf,
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

export { formatBytes };

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

/** The card of one `code-runner::run` call, in any phase. */
export function RunCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const code = text(input.code) ?? "";
  const { lang, guessed } = langOf(input);
  const askedRuntime = text(input.runtime_id);
  const keptRuntime = text(output.runtime_id) ?? askedRuntime;
  const exitCode = count(output.exit_code) ?? 0;
  const duration = count(output.duration_ms) ?? props.message.durationMs;
  const done = props.phase === "done";

  const tone = done ? (exitCode === 0 ? "ok" : "warn") : props.phase === "running" ? "running" : "pending";
  const verdict = done ? (
    <>
      exit {exitCode}
      {duration !== undefined && <span className="cr-verdict-sub"> · {formatDuration(duration)}</span>}
      {usageLine(output.usage)}
    </>
  ) : props.phase === "running" ? (
    "running…"
  ) : (
    "not run yet"
  );
  const mode = askedRuntime ? "in kept runtime" : input.keep === true ? "keep" : "one-shot";
  const timeout = count(input.timeout_ms);

  const result = output.result;
  const omitted = omission(result);
  const stdout = text(output.stdout) ?? "";
  const stderr = text(output.stderr) ?? "";

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
      {done && (
        <Section label="result" aside={omitted ? "omitted by the worker" : kindOf(result ?? null)} flag={omitted !== null}>
          {omitted ? (
            <OmittedValue omission={omitted} />
          ) : result === null || result === undefined ? (
            <>
              <ValueView value={null} />
              <NullResult lang={lang} exitCode={exitCode} />
            </>
          ) : (
            <ValueView value={result} />
          )}
        </Section>
      )}
      {done && <Images images={output.images} />}
      <Files input={input} output={output} done={done} />
      {keptRuntime && (
        <Section label="runtime">
          <div className="cr-row">
            <RuntimeChip id={keptRuntime} />
            <span className="cr-row-text">
              {askedRuntime
                ? "ran in this kept runtime"
                : done
                  ? "kept: pass its runtime_id to run here again (globals and files stay); tear it down when done"
                  : ""}
            </span>
          </div>
        </Section>
      )}
      {done && input.keep === true && !askedRuntime && !text(output.runtime_id) && (
        <Note>keep was asked, but a run that fails is not kept: no runtime_id came back.</Note>
      )}
      <Section label="code" aside={lang ?? undefined}>
        <CodeBlock code={code} lang={lang} />
      </Section>
      {done && (stdout !== "" || stderr !== "") && (
        <>
          {stdout !== "" && (
            <Section label="stdout" aside={cutNote(stdout, "stdout")} flag>
              <Terminal stream="stdout" text={stdout} />
            </Section>
          )}
          {stderr !== "" && (
            <Section label="stderr" aside={cutNote(stderr, "stderr")} flag>
              <Terminal stream="stderr" text={stderr} />
            </Section>
          )}
        </>
      )}
      {done && stdout === "" && stderr === "" && <p className="cr-quiet">nothing on stdout or stderr</p>}
    </Card>
  );
}
