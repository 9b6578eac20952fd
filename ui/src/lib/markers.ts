// The worker's output caps leave markers in a response (crates/code-runner-core/src/caps.rs):
//   stdout/stderr: head + "\n[…stdout truncated: was ~N KB; middle omitted]\n" + tail
//   result:        "<omitted: result was ~N KB (shape); returning it whole would …>"
// The cards find them so a reader sees "the worker cut this", not program output.

export type Stream = "stdout" | "stderr";

/** A piece of a stream: program text, or the worker's truncation marker. */
export type Segment =
  | { kind: "text"; text: string }
  | { kind: "truncated"; text: string; stream: Stream; kb: number };

const TRUNCATION: Record<Stream, RegExp> = {
  stdout: /\n\[…stdout truncated: was ~(\d+) KB; middle omitted\]\n/,
  stderr: /\n\[…stderr truncated: was ~(\d+) KB; middle omitted\]\n/,
};

/**
 * Splits a stream around its truncation marker. Only the first marker naming
 * this stream counts: the worker splices exactly one, and a program that prints
 * marker-shaped text later on gets it shown as its own output.
 */
export function splitStream(text: string, stream: Stream): Segment[] {
  const match = TRUNCATION[stream].exec(text);
  if (!match) return text === "" ? [] : [{ kind: "text", text }];
  const head = text.slice(0, match.index);
  const tail = text.slice(match.index + match[0].length);
  const segments: Segment[] = [];
  if (head !== "") segments.push({ kind: "text", text: head });
  segments.push({ kind: "truncated", text: match[0].trim(), stream, kb: Number(match[1]) });
  if (tail !== "") segments.push({ kind: "text", text: tail });
  return segments;
}

/** What an omission marker says about the value it replaced. */
export interface Omission {
  /** The marker, verbatim. */
  text: string;
  /** Approximate size of the dropped value. */
  kb: number;
  /** Its shape, e.g. `100000 array elements`. */
  shape: string;
}

const OMISSION = /^<omitted: result was ~(\d+) KB \(([^)]*)\);[^]*>$/;

/** The omission marker a result was replaced by, if it is one. */
export function omission(result: unknown): Omission | null {
  if (typeof result !== "string") return null;
  const match = OMISSION.exec(result);
  if (!match) return null;
  return { text: result, kb: Number(match[1]), shape: match[2] ?? "" };
}
