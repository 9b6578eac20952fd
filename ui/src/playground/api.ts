// The playground's calls: same-origin, JSON bodies with a JSON content type
// (what the server's edge requires), answers as values or `{error}`.

/** An error answer, as the HTTP API sends it. */
export interface CallFailure {
  code: string;
  message: string;
}

export type CallAnswer = { ok: true; value: unknown } | { ok: false; error: CallFailure };

/** The path of a function's call endpoint; `::` stays readable. */
export function callPath(functionId: string): string {
  return `/v1/call/${encodeURIComponent(functionId).replace(/%3A/gi, ":")}`;
}

/** Calls `functionId` with `payload` through `POST /v1/call/{id}`. */
export async function call(functionId: string, payload: unknown): Promise<CallAnswer> {
  let response: Response;
  try {
    response = await fetch(callPath(functionId), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(payload),
      credentials: "same-origin",
    });
  } catch (err) {
    return { ok: false, error: { code: "network", message: `the server did not answer: ${String(err)}` } };
  }
  return answerOf(response);
}

/** A JSON answer as a value or `{error}`. */
async function answerOf(response: Response): Promise<CallAnswer> {
  const body = await response.text();
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return {
      ok: false,
      error: { code: `http_${response.status}`, message: body.slice(0, 2000) || response.statusText },
    };
  }
  if (!response.ok) {
    const error = (value as { error?: Partial<CallFailure> } | null)?.error;
    return {
      ok: false,
      error: {
        code: typeof error?.code === "string" ? error.code : `http_${response.status}`,
        message: typeof error?.message === "string" ? error.message : body.slice(0, 2000),
      },
    };
  }
  return { ok: true, value };
}

/** Output a run wrote so far, as its events delivered it. */
export interface LiveOutput {
  stdout: string;
  stderr: string;
}

/**
 * Calls `functionId` asking for server-sent events (`Accept:
 * text/event-stream`): `onOutput` sees the output gathered so far while the
 * run writes it; the answer is the final `result` or `error` event. A server
 * that answers JSON instead (any function but a run) is read as `call` reads it.
 */
export async function callStreaming(
  functionId: string,
  payload: unknown,
  onOutput: (live: LiveOutput) => void,
): Promise<CallAnswer> {
  let response: Response;
  try {
    response = await fetch(callPath(functionId), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(payload),
      credentials: "same-origin",
    });
  } catch (err) {
    return { ok: false, error: { code: "network", message: `the server did not answer: ${String(err)}` } };
  }
  if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream") || !response.body) {
    return answerOf(response);
  }
  const live: LiveOutput = { stdout: "", stderr: "" };
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (event === "stdout" || event === "stderr") {
        const text = (JSON.parse(data) as { text?: unknown }).text;
        if (typeof text === "string") live[event] += text;
        onOutput({ ...live });
      } else if (event === "result") {
        return { ok: true, value: JSON.parse(data) as unknown };
      } else if (event === "error") {
        const error = (JSON.parse(data) as { error?: Partial<CallFailure> }).error;
        return {
          ok: false,
          error: { code: String(error?.code ?? "error"), message: String(error?.message ?? "") },
        };
      }
    }
  }
  return { ok: false, error: { code: "network", message: "the event stream ended without an answer" } };
}

/** `GET /healthz`, or null when it cannot be read. */
export async function health(): Promise<Record<string, unknown> | null> {
  try {
    const response = await fetch("/healthz", { headers: { Accept: "application/json" } });
    if (!response.ok) return null;
    return (await response.json()) as Record<string, unknown>;
  } catch {
    return null;
  }
}
