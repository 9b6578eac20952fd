// The card frame every renderer shares, and the parts cards are made of.
// Every string a guest or a caller wrote passes through `redactText` before it
// reaches the DOM; the only place a full runtime_id lives is the chip's
// click handler.

import { useEffect, useState, type ReactNode } from "react";
import { tokenize, type Lang } from "./highlight";
import { splitStream, type Omission, type Stream } from "./markers";
import { maskId, redactText, redactValue } from "./redact";
import { useTheme } from "./theme";

/** How a card's verdict reads: fine, worth a look, in flight, waiting for a person, or not yet run. */
export type Tone = "ok" | "warn" | "running" | "waiting" | "pending";

/** A function call as the console hands it to a renderer (the fields cards read). */
export interface CallMessage {
  functionId: string;
  input?: unknown;
  output?: unknown;
  durationMs?: number;
  running?: boolean;
  pendingApproval?: boolean;
}

/** Which moment of a call a card shows. */
export type Phase = "preview" | "running" | "done";

/** Text longer than this is clipped on a card (the raw answer keeps it whole). */
export const MAX_DISPLAY_CHARS = 100_000;

/** The object at `value`, or an empty one. */
export function record(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** `value` if it is a string, else `undefined`. */
export function text(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** `value` if it is a finite number, else `undefined`. */
export function count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** A duration for people: `12 ms`, `1.4 s`, `2 min 5 s`. */
export function formatDuration(ms: number): string {
  if (ms < 1) return "<1 ms";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** The frame: a header (operation, facts, verdict) over the card's sections. */
export function Card(props: {
  op: string;
  tone: Tone;
  verdict: ReactNode;
  facts?: ReactNode;
  children?: ReactNode;
}) {
  const theme = useTheme();
  return (
    <section className="cr-root cr-card" data-cr-theme={theme} data-cr-tone={props.tone}>
      <header className="cr-head">
        <span className="cr-op">{props.op}</span>
        <span className="cr-facts">{props.facts}</span>
        <span className="cr-verdict" data-cr-tone={props.tone}>
          <span className="cr-verdict-mark" aria-hidden="true" />
          <span className="cr-verdict-text">{props.verdict}</span>
        </span>
      </header>
      <div className="cr-body">{props.children}</div>
    </section>
  );
}

/** A labelled part of a card; `flag` makes the aside stand out (the worker changed this part). */
export function Section(props: { label: ReactNode; aside?: ReactNode; flag?: boolean; children?: ReactNode }) {
  return (
    <div className="cr-section">
      <div className="cr-label">
        <span>{props.label}</span>
        {props.aside !== undefined && (
          <span className="cr-label-aside" data-cr-flag={props.flag ? "worker" : undefined}>
            {props.aside}
          </span>
        )}
      </div>
      {props.children}
    </div>
  );
}

/** A small fact in a card's header. */
export function Fact(props: { children: ReactNode; title?: string }) {
  return (
    <span className="cr-fact" title={props.title}>
      {props.children}
    </span>
  );
}

/** A hint or a piece of advice under a value. */
export function Note(props: { tone?: "hint" | "advice"; children: ReactNode }) {
  return (
    <p className="cr-note" data-cr-note={props.tone ?? "hint"}>
      {props.children}
    </p>
  );
}

/** The raster types a card draws; anything else (SVG included) is never put in an `<img>`. */
const DRAWN_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The figures a run showed, in order: each raster image drawn from its base64, the
 * worker's omission marker (a `text/plain` entry) as a note, anything else named only.
 */
export function Images(props: { images: unknown }) {
  const list = Array.isArray(props.images) ? props.images.map(record) : [];
  if (list.length === 0) return null;
  const drawn = list.filter((image) => text(image.mime_type) !== "text/plain").length;
  return (
    <Section label="images" aside={`${drawn} figure${drawn === 1 ? "" : "s"}`}>
      <div className="cr-images">
        {list.map((image, index) => {
          const mime = text(image.mime_type) ?? "";
          const data = text(image.data) ?? "";
          if (mime === "text/plain") return <Note key={index}>{data}</Note>;
          if (DRAWN_TYPES.has(mime) && BASE64.test(data)) {
            return <img key={index} className="cr-image" alt={`figure ${index + 1}`} src={`data:${mime};base64,${data}`} />;
          }
          return <p key={index} className="cr-quiet">figure {index + 1}: {mime || "no type"}, not drawn</p>;
        })}
      </div>
    </Section>
  );
}

/** Inline code inside prose. */
export function Mono(props: { children: ReactNode }) {
  return <code className="cr-mono">{props.children}</code>;
}

function clip(value: string): { shown: string; hidden: number } {
  if (value.length <= MAX_DISPLAY_CHARS) return { shown: value, hidden: 0 };
  return { shown: value.slice(0, MAX_DISPLAY_CHARS), hidden: value.length - MAX_DISPLAY_CHARS };
}

function Clipped(props: { hidden: number }) {
  if (props.hidden === 0) return null;
  return (
    <span className="cr-clipped">
      display clipped here: {Math.ceil(props.hidden / 1024)} KB more in the raw answer
    </span>
  );
}

/** Source highlighted as `lang` (ids masked), with line numbers. */
export function CodeBlock(props: { code: string; lang: Lang | null }) {
  // A final newline ends the last line; it does not start an empty one.
  const { shown, hidden } = clip(redactText(props.code.replace(/\r?\n$/, "")));
  const tokens = props.lang ? tokenize(shown, props.lang) : [{ kind: "plain" as const, text: shown }];
  const lines = shown.split("\n").length;
  return (
    <div className="cr-code" data-cr-lang={props.lang ?? "unknown"}>
      <pre className="cr-gutter" aria-hidden="true">
        {Array.from({ length: lines }, (_, i) => i + 1).join("\n")}
      </pre>
      <pre className="cr-source">
        <code>
          <Tokens tokens={tokens} />
        </code>
        <Clipped hidden={hidden} />
      </pre>
    </div>
  );
}

/** Coloured tokens as spans (the editor overlay uses them too). */
export function Tokens(props: { tokens: { kind: string; text: string }[] }) {
  return (
    <>
      {props.tokens.map((token, i) =>
        token.kind === "plain" ? (
          token.text
        ) : (
          <span key={i} className={`cr-tok-${token.kind}`}>
            {token.text}
          </span>
        ),
      )}
    </>
  );
}

/** stdout or stderr as terminal output, the worker's truncation marker set apart. */
export function Terminal(props: { stream: Stream; text: string }) {
  const { shown, hidden } = clip(redactText(props.text));
  const segments = splitStream(shown, props.stream);
  return (
    <pre className="cr-term" data-cr-stream={props.stream}>
      {segments.map((segment, i) =>
        segment.kind === "text" ? (
          <span key={i}>{segment.text}</span>
        ) : (
          <span key={i} className="cr-marker" role="note" title="added by code-runner's output cap, not printed by the program">
            <span className="cr-marker-tag">worker</span>
            {segment.text}
          </span>
        ),
      )}
      <Clipped hidden={hidden} />
    </pre>
  );
}

/** What kind of JSON value `value` is, for a label. */
export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `array, ${value.length} element${value.length === 1 ? "" : "s"}`;
  if (typeof value === "object") {
    const keys = Object.keys(value as object).length;
    return `object, ${keys} key${keys === 1 ? "" : "s"}`;
  }
  if (typeof value === "string") return `string, ${value.length} char${value.length === 1 ? "" : "s"}`;
  return typeof value;
}

/** `value` as indented JSON, ids masked; a value too deep for JSON.stringify says so instead of crashing the card. */
function pretty(value: unknown): string {
  try {
    return JSON.stringify(redactValue(value), null, 2) ?? "null";
  } catch {
    return "(too deeply nested to show here; the raw answer has it)";
  }
}

/** A JSON value, ids masked: a string as its text, anything else pretty-printed. */
export function ValueView(props: { value: unknown }) {
  const json = typeof props.value === "string" ? redactText(props.value) : pretty(props.value);
  const { shown, hidden } = clip(json);
  const kind = props.value === null ? "null" : Array.isArray(props.value) ? "array" : typeof props.value;
  return (
    <pre className="cr-value" data-cr-kind={kind}>
      {shown}
      <Clipped hidden={hidden} />
    </pre>
  );
}

/** The marker that replaced an oversized result. */
export function OmittedValue(props: { omission: Omission }) {
  return (
    <div className="cr-omitted" role="note">
      <div className="cr-omitted-head">
        <span className="cr-marker-tag">worker</span>
        result omitted: ~{props.omission.kb} KB ({redactText(props.omission.shape)})
      </div>
      <div className="cr-omitted-text">{redactText(props.omission.text)}</div>
    </div>
  );
}

/** Copies `value` to the clipboard; falls back to a transient selection. */
async function copyText(value: string): Promise<void> {
  if (typeof navigator !== "undefined" && navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(value);
    return;
  }
  const area = document.createElement("textarea");
  area.value = value;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  try {
    area.select();
    if (!document.execCommand("copy")) throw new Error("copy refused");
  } finally {
    area.remove();
  }
}

/**
 * A runtime_id (or, with `kind="call"`, a suspended run's call_id): shown
 * truncated; the full value leaves only on an explicit click, to the
 * clipboard. It is never put in the DOM (no attribute, no text).
 */
export function RuntimeChip(props: { id: string; kind?: "runtime" | "call" }) {
  const kind = props.kind ?? "runtime";
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return;
    const timer = setTimeout(() => setState("idle"), 1800);
    return () => clearTimeout(timer);
  }, [state]);
  const shown = maskId(props.id);
  const copy = () => {
    copyText(props.id).then(
      () => setState("copied"),
      () => setState("failed"),
    );
  };
  return (
    <button
      type="button"
      className="cr-chip"
      onClick={copy}
      title={`${kind}_id is a secret: click to copy the full id`}
      aria-label={`${kind} ${shown}: copy the full id`}
    >
      <span className="cr-chip-id">{shown}</span>
      <span className="cr-chip-act" data-cr-state={state}>
        {state === "copied" ? "copied" : state === "failed" ? "copy failed" : "copy"}
      </span>
    </button>
  );
}
