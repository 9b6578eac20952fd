// The playground served at GET /: write code, run it one-shot or kept, register
// a function and call it. Every answer is drawn by the console's own renderers;
// only failed calls and calls to registered functions get the playground's cards.
// A run that answers `suspended` gets Approve / Deny under its card (Approval.tsx).

import { useEffect, useState } from "react";
import { renderCall } from "../function-trigger-message";
import type { Lang } from "../lib/highlight";
import { Card, Fact, RuntimeChip, Section, ValueView, formatDuration, text, type CallMessage } from "../lib/shared";
import { redactText } from "../lib/redact";
import { useTheme } from "../lib/theme";
import { call, callStreaming, health, type LiveOutput } from "./api";
import { Approval, type ResumeInput } from "./Approval";
import { Attach, filesAndCollect, type Attached } from "./Attach";
import { Editor } from "./Editor";

const RUN = "code-runner::run";
const REGISTER = "code-runner::register_function";
const TEARDOWN = "code-runner::teardown";
const SNAPSHOT = "code-runner::snapshot";
const RESTORE = "code-runner::restore";
const RESUME = "code-runner::resume";

/** How many answers the feed keeps. */
const MAX_FEED = 40;

const SAMPLE_CODE: Record<Lang, string> = {
  python: 'print("hi")\nresult = 2 + 2\n',
  node: 'console.log("hi");\nreturn 2 + 2;\n',
  typescript: 'const greet = (name: string): string => `hi ${name}`;\nconsole.log(greet("ts"));\nreturn (2 + 2) satisfies number;\n',
};

const SAMPLE_HANDLER: Record<Lang, string> = {
  python: 'def handler(payload):\n    name = payload.get("name", "world")\n    return {"greeting": f"hello, {name}"}\n',
  node: 'export function handler(payload) {\n  return { greeting: `hello, ${payload.name ?? "world"}` };\n}\n',
  typescript: 'export function handler(payload: { name?: string }): { greeting: string } {\n  return { greeting: `hello, ${payload.name ?? "world"}` };\n}\n',
};

interface Entry {
  key: number;
  message: CallMessage;
  /** A run's output while it runs, from its event stream. */
  live?: LiveOutput;
  /** A suspended answer's decision, once made here. */
  decided?: "approved" | "denied";
}

interface Kept {
  id: string;
  lang: Lang;
}

let nextKey = 1;

function ErrorCard(props: { message: CallMessage }) {
  const error = (props.message.output as { error?: { code?: unknown; message?: unknown } }).error ?? {};
  return (
    <Card op={props.message.functionId.replace(/^code-runner::/, "")} tone="warn" verdict="error">
      <Section label="error">
        <div className="pg-error-code">{redactText(text(error.code) ?? "error")}</div>
        <p className="pg-error-message">{redactText(text(error.message) ?? "")}</p>
      </Section>
    </Card>
  );
}

function CallCard(props: { message: CallMessage }) {
  const running = props.message.running === true;
  return (
    <Card
      op={redactText(props.message.functionId)}
      tone={running ? "running" : "ok"}
      verdict={running ? "calling…" : `answered${props.message.durationMs !== undefined ? ` · ${formatDuration(props.message.durationMs)}` : ""}`}
      facts={<Fact>registered function</Fact>}
    >
      <Section label="payload">
        <ValueView value={props.message.input} />
      </Section>
      {!running && (
        <Section label="answer">
          <ValueView value={props.message.output ?? null} />
        </Section>
      )}
    </Card>
  );
}

/** What a running run has printed so far, beside its card. */
function LiveView(props: { live: LiveOutput }) {
  return (
    <div className="pg-live" aria-label="live output">
      {props.live.stdout && <pre className="pg-live-stream" data-stream="stdout">{redactText(props.live.stdout)}</pre>}
      {props.live.stderr && <pre className="pg-live-stream" data-stream="stderr">{redactText(props.live.stderr)}</pre>}
    </div>
  );
}

function EntryView(props: { entry: Entry; onResume(entry: Entry, input: ResumeInput): void }) {
  const { message, live } = props.entry;
  const phase = message.running ? "running" : "done";
  const failed = !message.running && message.output !== null && typeof message.output === "object" && "error" in message.output;
  const card = renderCall(message, phase);
  if (card)
    return (
      <>
        {card}
        {message.running && live && <LiveView live={live} />}
        {!message.running && !failed && (
          <Approval output={message.output} decided={props.entry.decided} onDecide={(input) => props.onResume(props.entry, input)} />
        )}
      </>
    );
  if (failed) return <ErrorCard message={message} />;
  return <CallCard message={message} />;
}

function LangPicker(props: { lang: Lang; onChange(lang: Lang): void; engines: Record<string, string> }) {
  return (
    <div className="pg-lang" role="radiogroup" aria-label="language">
      {(["python", "node", "typescript"] as const).map((lang) => {
        // TypeScript runs on the node engine: its status is node's.
        const status = props.engines[lang === "typescript" ? "node" : lang];
        const ready = status === undefined || status === "ready";
        return (
          <button
            key={lang}
            type="button"
            role="radio"
            aria-checked={props.lang === lang}
            className="pg-lang-option"
            onClick={() => props.onChange(lang)}
            title={ready ? undefined : `${lang}: ${status}`}
          >
            {lang}
            {!ready && <span className="pg-lang-status">{status}</span>}
          </button>
        );
      })}
    </div>
  );
}

export function App() {
  const theme = useTheme();
  const [tab, setTab] = useState<"run" | "register">("run");
  const [lang, setLang] = useState<Lang>("python");
  const [code, setCode] = useState(SAMPLE_CODE.python);
  const [timeoutMs, setTimeoutMs] = useState("");
  const [feed, setFeed] = useState<Entry[]>([]);
  const [kept, setKept] = useState<Kept[]>([]);
  const [engines, setEngines] = useState<Record<string, string>>({});
  const [functionId, setFunctionId] = useState("playground::greet");
  const [source, setSource] = useState(SAMPLE_HANDLER.python);
  const [registered, setRegistered] = useState<{ id: string; lang: Lang }[]>([]);
  const [payload, setPayload] = useState('{"name": "playground"}');
  const [busy, setBusy] = useState(0);
  const [attached, setAttached] = useState<Attached[]>([]);
  const [collect, setCollect] = useState("");

  useEffect(() => {
    health().then((answer) => {
      const reported = (answer?.engines ?? {}) as Record<string, unknown>;
      const known: Record<string, string> = {};
      for (const [name, status] of Object.entries(reported)) if (typeof status === "string") known[name] = status;
      setEngines(known);
    });
  }, []);

  const switchLang = (next: Lang) => {
    // Sample code follows the language; code the user wrote stays.
    if (code === SAMPLE_CODE[lang]) setCode(SAMPLE_CODE[next]);
    if (source === SAMPLE_HANDLER[lang]) setSource(SAMPLE_HANDLER[next]);
    setLang(next);
  };

  /** Sends one call, showing it as running, then as answered. */
  const send = async (functionId: string, input: unknown) => {
    const key = nextKey++;
    const started = performance.now();
    setBusy((n) => n + 1);
    setFeed((entries) => [{ key, message: { functionId, input, running: true } }, ...entries].slice(0, MAX_FEED));
    const answer =
      functionId === RUN
        ? await callStreaming(functionId, input, (live) =>
            setFeed((entries) => entries.map((entry) => (entry.key === key ? { ...entry, live } : entry))),
          )
        : await call(functionId, input);
    const durationMs = Math.round(performance.now() - started);
    const output = answer.ok ? answer.value : { error: answer.error };
    setFeed((entries) =>
      entries.map((entry) => (entry.key === key ? { key, message: { functionId, input, output, durationMs } } : entry)),
    );
    setBusy((n) => n - 1);
    return answer;
  };

  const run = async (mode: "once" | "keep" | Kept) => {
    const input: Record<string, unknown> = { lang, code, ...filesAndCollect(attached, collect) };
    if (mode === "keep") input.keep = true;
    if (typeof mode === "object") input.runtime_id = mode.id;
    const timeout = Number(timeoutMs);
    if (timeoutMs.trim() !== "" && Number.isFinite(timeout) && timeout >= 0) input.timeout_ms = Math.floor(timeout);
    const answer = await send(RUN, input);
    if (answer.ok && mode === "keep") {
      const id = text((answer.value as Record<string, unknown>).runtime_id);
      if (id) setKept((list) => [{ id, lang }, ...list]);
    }
    if (!answer.ok && typeof mode === "object" && (answer.error.code === "code-runner::expired" || answer.error.code === "code-runner::runtime_not_found")) {
      setKept((list) => list.filter((item) => item.id !== mode.id));
    }
  };

  /** Decides a suspended answer: code-runner::resume, whose answer shows as a run's. */
  const resume = async (entry: Entry, input: ResumeInput) => {
    const decided = input.approve ? "approved" : "denied";
    setFeed((entries) => entries.map((item) => (item.key === entry.key ? { ...item, decided } : item)));
    await send(RESUME, input);
  };

  const tearDown = async (runtime: Kept) => {
    const answer = await send(TEARDOWN, { runtime_id: runtime.id });
    if (answer.ok || answer.error.code === "code-runner::expired" || answer.error.code === "code-runner::runtime_not_found") {
      setKept((list) => list.filter((item) => item.id !== runtime.id));
    }
  };

  /** Forks a kept runtime (python's by memory, node's by its turn ledger): a snapshot of it, restored as a new kept runtime beside it. */
  const fork = async (runtime: Kept) => {
    const taken = await send(SNAPSHOT, { runtime_id: runtime.id });
    if (!taken.ok) return;
    const snapshotId = text((taken.value as Record<string, unknown>).snapshot_id);
    if (!snapshotId) return;
    const restored = await send(RESTORE, { snapshot_id: snapshotId });
    if (!restored.ok) return;
    const id = text((restored.value as Record<string, unknown>).runtime_id);
    if (id) setKept((list) => [{ id, lang: runtime.lang }, ...list]);
  };

  const register = async () => {
    const answer = await send(REGISTER, { function_id: functionId, lang, source });
    if (answer.ok) {
      setRegistered((list) => [{ id: functionId, lang }, ...list.filter((item) => item.id !== functionId)]);
    }
  };

  const invoke = async (id: string) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch (err) {
      setFeed((entries) =>
        [
          {
            key: nextKey++,
            message: { functionId: id, input: payload, output: { error: { code: "playground", message: `the payload is not JSON: ${String(err)}` } } },
          },
          ...entries,
        ].slice(0, MAX_FEED),
      );
      return;
    }
    await send(id, parsed);
  };

  const tearDownNamespace = async (id: string) => {
    const namespace = id.split("::")[0] ?? id;
    const answer = await send(TEARDOWN, { namespace });
    if (answer.ok) setRegistered((list) => list.filter((item) => !item.id.startsWith(`${namespace}::`)));
  };

  return (
    <div className="cr-root pg" data-cr-theme={theme}>
      <header className="pg-top">
        <h1>
          code-runner <span className="pg-top-sub">playground</span>
        </h1>
        <span className="pg-status" aria-live="polite">
          {busy > 0 ? `${busy} call${busy === 1 ? "" : "s"} in flight` : "idle"}
        </span>
      </header>
      <main className="pg-main">
        <section className="pg-compose" aria-label="compose">
          <div className="pg-tabs" role="tablist">
            <button type="button" role="tab" aria-selected={tab === "run"} onClick={() => setTab("run")}>
              Run code
            </button>
            <button type="button" role="tab" aria-selected={tab === "register"} onClick={() => setTab("register")}>
              Register a function
            </button>
          </div>
          <LangPicker lang={lang} onChange={switchLang} engines={engines} />
          {tab === "run" ? (
            <>
              <Editor label="code" lang={lang} value={code} onChange={setCode} onSubmit={() => run("once")} minLines={10} />
              <p className="pg-hint">
                {lang === "python"
                  ? "Python runs as a module: assign result = … to return a value."
                  : lang === "typescript"
                    ? "TypeScript runs on node with its types stripped (not checked): return … gives the value."
                    : "Node runs an async function body: return … gives the value."}{" "}
                Ctrl+Enter runs.
              </p>
              <div className="pg-actions">
                <button type="button" className="pg-primary" onClick={() => run("once")}>
                  Run
                </button>
                <button type="button" onClick={() => run("keep")}>
                  Run &amp; keep
                </button>
                <label className="pg-field-inline">
                  timeout ms
                  <input inputMode="numeric" placeholder="5000" value={timeoutMs} onChange={(event) => setTimeoutMs(event.target.value)} />
                </label>
              </div>
              <Attach attached={attached} onChange={setAttached} collect={collect} onCollect={setCollect} />
              {kept.length > 0 && (
                <div className="pg-kept" aria-label="kept runtimes">
                  <div className="pg-kept-title">kept runtimes</div>
                  {kept.map((runtime) => (
                    <div className="pg-kept-row" key={runtime.id}>
                      <RuntimeChip id={runtime.id} />
                      <span className="pg-kept-lang">{runtime.lang}</span>
                      <button
                        type="button"
                        onClick={() => run(runtime)}
                        disabled={runtime.lang !== lang}
                        title={runtime.lang !== lang ? `switch to ${runtime.lang} to run here` : "run the editor's code in this runtime"}
                      >
                        Run here
                      </button>
                      <button type="button" onClick={() => fork(runtime)} title="snapshot this runtime and restore it as a second one: try two continuations">
                        Fork
                      </button>
                      <button type="button" onClick={() => tearDown(runtime)}>
                        Tear down
                      </button>
                    </div>
                  ))}
                </div>
              )}
            </>
          ) : (
            <>
              <label className="pg-field">
                function id
                <input value={functionId} onChange={(event) => setFunctionId(event.target.value)} spellCheck={false} />
              </label>
              <Editor label="handler source" lang={lang} value={source} onChange={setSource} onSubmit={register} minLines={8} />
              <div className="pg-actions">
                <button type="button" className="pg-primary" onClick={register}>
                  Register
                </button>
              </div>
              <label className="pg-field">
                payload (JSON)
                <input value={payload} onChange={(event) => setPayload(event.target.value)} spellCheck={false} />
              </label>
              <div className="pg-kept" aria-label="registered functions">
                <div className="pg-kept-title">registered here</div>
                {registered.length === 0 && <p className="pg-hint">Nothing yet: register one above, then call it.</p>}
                {registered.map((item) => (
                  <div className="pg-kept-row" key={item.id}>
                    <span className="pg-fn">{item.id}</span>
                    <span className="pg-kept-lang">{item.lang}</span>
                    <button type="button" onClick={() => invoke(item.id)}>
                      Call
                    </button>
                    <button type="button" onClick={() => tearDownNamespace(item.id)}>
                      Tear down namespace
                    </button>
                  </div>
                ))}
              </div>
            </>
          )}
        </section>
        <section className="pg-feed" aria-label="answers">
          {feed.length === 0 ? (
            <p className="pg-empty">Answers appear here, newest first, drawn as the iii console draws them.</p>
          ) : (
            feed.map((entry) => (
              <div className="pg-entry" key={entry.key}>
                <EntryView entry={entry} onResume={resume} />
              </div>
            ))
          )}
        </section>
      </main>
    </div>
  );
}
