// runtime_id is a capability: no card and no raw JSON may carry one in full.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { createRenderer } from "../src/function-trigger-message";
import { containsCallId, containsRuntimeId, maskId, redactRaw, redactText } from "../src/lib/redact";
import { RuntimeChip } from "../src/lib/shared";
import { callId, done, runResponse, runtimeId } from "./fixtures";

const renderer = createRenderer();
const markup = (node: unknown) => renderToStaticMarkup(<>{node as React.ReactNode}</>);

describe("runtime ids on cards", () => {
  /// The chip is the only place an id appears, truncated; the full value is not in the DOM at all.
  it("renders a kept runtime as a truncated chip and nowhere in full", () => {
    const id = runtimeId();
    const html = markup(renderer.tryRender(done("code-runner::run", { lang: "python", keep: true, code: "x = 1" }, runResponse({ runtime_id: id }))));
    expect(html).toContain('class="cr-chip"');
    expect(html).toContain(`<span class="cr-chip-id">${id.slice(0, 7)}…</span>`);
    expect(html).not.toContain(id);
    expect(html).not.toContain(id.slice(7));
    expect(containsRuntimeId(html)).toBe(false);
  });

  /// Ids reach cards through every string a guest or caller controls; each one is filtered.
  it("masks ids inside stdout, stderr, the source, the completion value and the input", () => {
    const id = runtimeId();
    const html = markup(
      renderer.tryRender(
        done(
          "code-runner::run",
          { runtime_id: id, lang: "python", code: `other = "${id}"\nresult = {"${id}": [other]}` },
          runResponse({
            runtime_id: id,
            stdout: `I am ${id}\n`,
            stderr: `runtime ${id} says hi\n[…stderr truncated: was ~3 KB; middle omitted]\n${id}`,
            result: { [id]: [id, { nested: `x${id}y` }] },
          }),
        ),
      ),
    );
    expect(html).not.toContain(id);
    expect(containsRuntimeId(html)).toBe(false);
    expect(html).toContain(maskId(id));
  });

  /// Error messages quote ids by design; the register and teardown cards filter theirs too.
  it("masks ids on the register_function and teardown cards", () => {
    const id = runtimeId();
    const register = markup(
      renderer.tryRender(done("code-runner::register_function", { function_id: `ns::f`, lang: "python", source: `# ${id}\ndef handler(p):\n    return "${id}"`, description: id }, { function_id: "ns::f", registered: true })),
    );
    const teardown = markup(renderer.tryRender(done("code-runner::teardown", { runtime_id: id }, { torn_down: true, unregistered: [`${id}::x`], runtime_id: id })));
    for (const html of [register, teardown]) {
      expect(html).not.toContain(id);
      expect(containsRuntimeId(html)).toBe(false);
    }
  });

  /// The chip component itself: nothing of the id beyond its visible prefix, in text or attributes.
  it("keeps the full id out of the chip's markup, attributes included", () => {
    const id = runtimeId();
    const html = markup(<RuntimeChip id={id} />);
    expect(html).not.toContain(id.slice(7));
    expect(html).toContain("copy");
  });
});

describe("redactRaw", () => {
  /// The console mounts the raw JSON regardless of the card; what it shows and copies must be masked.
  it("masks ids in every string and key of the raw answer", () => {
    const id = runtimeId();
    const other = runtimeId();
    const raw = {
      input: { runtime_id: id, code: `print("${other}")` },
      output: { runtime_id: id, stdout: `${other}\n`, result: { [id]: [1, `x ${other}`, null, true] }, exit_code: 0 },
    };
    const redacted = JSON.stringify(renderer.redactRaw(raw));
    expect(redacted).not.toContain(id);
    expect(redacted).not.toContain(other);
    expect(containsRuntimeId(redacted)).toBe(false);
    expect(redacted).toContain(maskId(id));
    expect(redacted).toContain('"exit_code":0');
    // The original is left alone.
    expect(raw.output.runtime_id).toBe(id);
  });

  /// A guest controls the completion value's depth; masking must not overflow the stack.
  it("handles a very deeply nested value without overflowing the stack", () => {
    const id = runtimeId();
    let deep: unknown = id;
    for (let i = 0; i < 200_000; i += 1) deep = [deep];
    let out = redactRaw(deep);
    for (let i = 0; i < 200_000; i += 1) out = (out as unknown[])[0];
    expect(out).toBe(maskId(id));
  });

  /// Scalars pass through; shapes that are not JSON do not crash the hook.
  it("passes scalars through and tolerates non-JSON values", () => {
    expect(redactRaw(4)).toBe(4);
    expect(redactRaw(null)).toBe(null);
    expect(redactRaw(undefined)).toBe(null);
    expect(redactRaw({ f: () => 1, n: Number.NaN })).toEqual({ f: null, n: null });
  });
});

describe("call ids of suspended runs", () => {
  /// A call id approves the call with the runtime id: masked in every string and in the raw JSON.
  it("masks call ids on the card, in guest output and in the raw answer", () => {
    const id = runtimeId();
    const call = callId();
    const output = runResponse({ runtime_id: id, stdout: `waiting on ${call}\n`, suspended: { call_id: call, function_id: "billing::charge", payload: { note: call } } });
    const html = markup(renderer.tryRender(done("code-runner::run", { lang: "python", code: `print("${call}")` }, output)));
    expect(html).not.toContain(call);
    expect(containsCallId(html)).toBe(false);
    expect(html).toContain(maskId(call));
    const resume = markup(renderer.tryRender(done("code-runner::resume", { runtime_id: id, call_id: call, approve: false, reason: call }, runResponse({ stdout: call }))));
    expect(resume).not.toContain(call);
    expect(containsRuntimeId(resume)).toBe(false);
    const raw = JSON.stringify(renderer.redactRaw({ input: { runtime_id: id, call_id: call }, output }));
    expect(raw).not.toContain(call);
    expect(raw).not.toContain(id);
    expect(raw).toContain(`"call_id":"${call.slice(0, 9)}…"`);
  });

  /// Only the worker's shape is masked: snake_case names that start with call_ are code, not ids.
  it("leaves call_ words that are not ids alone", () => {
    expect(redactText("call_the_handler_now_please call_short")).toBe("call_the_handler_now_please call_short");
    expect(maskId("call_AbCdEfGhIjKlMnOpQrStUvWx")).toBe("call_AbCd…");
  });
});

describe("redactText", () => {
  /// Ids are recognised by shape, wherever they sit in a string, and short rt_ words are left alone.
  it("masks id-shaped words only", () => {
    const id = runtimeId();
    expect(redactText(`a${id}b`)).toBe(`a${maskId(id)}`);
    expect(redactText("rt_short and rt_")).toBe("rt_short and rt_");
    expect(redactText(`${id} ${id}`)).toBe(`${maskId(id)} ${maskId(id)}`);
  });
});

describe("snapshot ids", () => {
  /// A snapshot id restores a session: the snapshot and restore cards and the raw JSON show it masked.
  it("masks snapshot ids on the snapshot and restore cards and in the raw answer", () => {
    const id = runtimeId();
    const fork = runtimeId();
    const snapshot = `sn_${runtimeId().slice(3)}`;
    const taken = markup(renderer.tryRender(done("code-runner::snapshot", { runtime_id: id }, { snapshot_id: snapshot, bytes: 412345, created_at: 1 })));
    expect(taken).toContain("saved");
    expect(taken).toContain(maskId(snapshot));
    expect(taken).toContain("403 KB");
    const restored = markup(renderer.tryRender(done("code-runner::restore", { snapshot_id: snapshot }, { runtime_id: fork })));
    expect(restored).toContain("restored");
    for (const html of [taken, restored]) {
      expect(html).not.toContain(snapshot);
      expect(containsRuntimeId(html)).toBe(false);
    }
    const raw = JSON.stringify(renderer.redactRaw({ input: { snapshot_id: snapshot }, output: { runtime_id: fork } }));
    expect(raw).not.toContain(snapshot);
    expect(raw).toContain(`"snapshot_id":"${snapshot.slice(0, 7)}…"`);
    expect(redactText(`kept as ${snapshot}.`)).toBe(`kept as ${snapshot.slice(0, 7)}….`);
  });

  /// A run that woke a hibernated session says so on its card.
  it("says when a run woke its session from hibernation", () => {
    const html = markup(renderer.tryRender(done("code-runner::run", { runtime_id: runtimeId(), code: "x" }, runResponse({ restored: true }))));
    expect(html).toContain("woken from hibernation");
  });
});
