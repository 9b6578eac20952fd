// runtime_id is a capability: whoever holds one can run in or tear down that
// runtime. So is a snapshot_id (`sn_…`): whoever holds one restores it. So is a suspended run's call_id: with the runtime id, it approves
// or denies the call that waits. Nothing a card shows may contain either in
// full, and neither may the raw JSON the console mounts beside the card
// (`redactRaw`).
//
// The worker mints runtime ids as `rt_` + 32 alphanumerics
// (crates/code-runner/src/ids.rs) and call ids as `call_` + 24
// (crates/code-runner/src/ops/approvals/mod.rs). The runtime pattern is
// deliberately wider (URL-safe alphabet, 16+ characters) so a future id
// format, or one cut short by a stream's truncation, is still masked; the call
// pattern takes alphanumerics only, so a snake_case name such as
// `call_the_handler` is left alone.

/** Matches anything that looks like a runtime id. */
export const RUNTIME_ID_PATTERN = /rt_[A-Za-z0-9_-]{16,}/g;

/** Matches anything that looks like a snapshot id (`sn_` + 32 alphanumerics): also a capability. */
export const SNAPSHOT_ID_PATTERN = /sn_[A-Za-z0-9]{16,}/g;

/** Matches anything that looks like a call id of a suspended run. */
export const CALL_ID_PATTERN = /call_[A-Za-z0-9]{16,}/g;

/** Characters of a runtime id that stay visible: `rt_` and four more, as the worker's logs show. */
export const VISIBLE_ID_CHARS = 7;

/** Characters of a call id that stay visible: `call_` and four more. */
export const VISIBLE_CALL_ID_CHARS = 9;

/** The shown form of an id: its prefix (`rt_`, `call_`), four more characters and an ellipsis. */
export function maskId(id: string): string {
  return `${id.slice(0, id.startsWith("call_") ? VISIBLE_CALL_ID_CHARS : VISIBLE_ID_CHARS)}…`;
}

/** `text` with every runtime id and call id in it masked. */
export function redactText(text: string): string {
  return text.replace(RUNTIME_ID_PATTERN, maskId).replace(SNAPSHOT_ID_PATTERN, maskId).replace(CALL_ID_PATTERN, maskId);
}

/** True when `text` contains something shaped like a full runtime id. */
export function containsRuntimeId(text: string): boolean {
  return new RegExp(RUNTIME_ID_PATTERN.source).test(text);
}

/** True when `text` contains something shaped like a full call id. */
export function containsCallId(text: string): boolean {
  return new RegExp(CALL_ID_PATTERN.source).test(text);
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * A deep copy of `value` with every string and object key masked. Iterative, so
 * a deeply nested value (a guest controls the completion value) cannot overflow
 * the stack; values JSON cannot hold (functions, symbols) become null.
 */
export function redactValue(value: unknown): unknown {
  const convert = (item: unknown): { out: Json; children?: [unknown, Json[] | Record<string, Json>] } => {
    if (typeof item === "string") return { out: redactText(item) };
    if (item === null || typeof item === "boolean") return { out: item };
    if (typeof item === "number") return { out: Number.isFinite(item) ? item : null };
    if (typeof item === "bigint") return { out: redactText(item.toString()) };
    if (Array.isArray(item)) {
      const out: Json[] = [];
      return { out, children: [item, out] };
    }
    if (typeof item === "object") {
      const out: Record<string, Json> = {};
      return { out, children: [item, out] };
    }
    return { out: null };
  };
  const root = convert(value);
  const stack: Array<[unknown, Json[] | Record<string, Json>]> = root.children ? [root.children] : [];
  while (stack.length > 0) {
    const [source, target] = stack.pop()!;
    if (Array.isArray(source) && Array.isArray(target)) {
      for (const element of source) {
        const next = convert(element);
        target.push(next.out);
        if (next.children) stack.push(next.children);
      }
    } else if (!Array.isArray(target)) {
      for (const [key, element] of Object.entries(source as Record<string, unknown>)) {
        if (element === undefined) continue;
        const next = convert(element);
        target[redactText(key)] = next.out;
        if (next.children) stack.push(next.children);
      }
    }
  }
  return root.out;
}

/** The console's `redactRaw` hook: the raw JSON it shows and copies, ids masked. */
export function redactRaw(value: unknown): unknown {
  return redactValue(value);
}
