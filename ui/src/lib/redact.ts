// runtime_id is a capability: whoever holds one can run in or tear down that
// runtime. Nothing a card shows may contain one in full, and neither may the
// raw JSON the console mounts beside the card (`redactRaw`).
//
// The worker mints ids as `rt_` + 32 alphanumerics (crates/code-runner/src/ids.rs).
// The pattern is deliberately wider (URL-safe alphabet, 16+ characters) so a
// future id format, or one cut short by a stream's truncation, is still masked.

/** Matches anything that looks like a runtime id. */
export const RUNTIME_ID_PATTERN = /rt_[A-Za-z0-9_-]{16,}/g;

/** Characters of an id that stay visible: `rt_` and four more, as the worker's logs show. */
export const VISIBLE_ID_CHARS = 7;

/** The shown form of a runtime id: its first characters and an ellipsis. */
export function maskId(id: string): string {
  return `${id.slice(0, VISIBLE_ID_CHARS)}…`;
}

/** `text` with every runtime id in it masked. */
export function redactText(text: string): string {
  return text.replace(RUNTIME_ID_PATTERN, maskId);
}

/** True when `text` contains something shaped like a full runtime id. */
export function containsRuntimeId(text: string): boolean {
  return new RegExp(RUNTIME_ID_PATTERN.source).test(text);
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
