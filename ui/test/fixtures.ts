// Shared test data: runtime ids shaped like the worker's, and call messages.

import type { CallMessage } from "../src/lib/shared";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A runtime id as crates/code-runner/src/ids.rs mints them: rt_ + 32 alphanumerics. */
export function runtimeId(): string {
  let body = "";
  for (let i = 0; i < 32; i += 1) body += ALPHABET[Math.floor(Math.random() * ALPHABET.length)];
  return `rt_${body}`;
}

/** A call id of a suspended run, as crates/code-runner/src/ops/approvals/mod.rs mints them: call_ + 24 alphanumerics. */
export function callId(): string {
  let body = "";
  for (let i = 0; i < 24; i += 1) body += ALPHABET[Math.floor(Math.random() * ALPHABET.length)];
  return `call_${body}`;
}

/** A finished call. */
export function done(functionId: string, input: unknown, output: unknown): CallMessage {
  return { functionId, input, output, durationMs: 20 };
}

/** A run response with defaults for what a test does not care about. */
export function runResponse(fields: Record<string, unknown>): Record<string, unknown> {
  return { stdout: "", stderr: "", exit_code: 0, success: true, duration_ms: 12, result: null, ...fields };
}
