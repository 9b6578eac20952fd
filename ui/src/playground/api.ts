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
