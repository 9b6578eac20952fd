// The cards, rendered server-side exactly as the console would mount them.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { createRenderer } from "../src/function-trigger-message";
import { MAX_LISTED } from "../src/function-trigger-message/files";
import { MAX_DISPLAY_CHARS } from "../src/lib/shared";
import { callId, done, runResponse, runtimeId } from "./fixtures";

const renderer = createRenderer();

function html(node: unknown): string {
  expect(node).not.toBeNull();
  return renderToStaticMarkup(<div data-iii-ui="code-runner">{node as React.ReactNode}</div>);
}

/** The visible text of some markup, tags stripped and entities decoded enough for asserts. */
function textOf(markup: string): string {
  return markup
    .replace(/<[^>]+>/g, "")
    .replace(/&quot;/g, '"')
    .replace(/&#x27;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

describe("run card", () => {
  /// A typescript run is labelled and highlighted as TypeScript, and the
  /// usage the worker measured is a quiet line under the verdict.
  it("highlights typescript and shows usage under the verdict", () => {
    const markup = html(
      renderer.tryRender(
        done(
          "code-runner::run",
          { lang: "typescript", code: "interface P { x: number }\nconst p: P = { x: 1 };\nreturn p.x;" },
          runResponse({ result: 1, usage: { cpu_ms: 0.56, peak_memory_bytes: 1118134, wall_ms: 3 } }),
        ),
      ),
    );
    expect(markup).toMatch(/<span class="cr-tok-keyword">interface<\/span>/);
    expect(markup).toMatch(/<span class="cr-tok-builtin">number<\/span>/);
    expect(textOf(markup)).toContain("typescript");
    expect(markup).toMatch(/class="cr-verdict-usage"[^>]*>cpu 0.56 ms · peak 1.1 MB</);
  });

  /// The issue's own example: the verdict, then the value, then the source, then stdout.
  it("leads with the verdict, then the value, the source and stdout, in that order", () => {
    const markup = html(
      renderer.tryRender(
        done(
          "code-runner::run",
          { lang: "python", code: 'print("hi"); result = 2 + 2' },
          runResponse({ stdout: "hi\n", result: 4, duration_ms: 37 }),
        ),
      ),
    );
    const text = textOf(markup);
    expect(markup).toContain('data-cr-tone="ok"');
    const order = ["exit 0", "37 ms", "result", "4", "code", "print", "stdout", "hi"].map((part) => {
      const at = text.indexOf(part);
      expect(at, `"${part}" is on the card`).toBeGreaterThanOrEqual(0);
      return at;
    });
    const verdict = order[0]!;
    const value = text.indexOf("4", text.indexOf("result"));
    const source = text.indexOf("print");
    const stdout = text.indexOf("hi\n", source);
    expect(verdict).toBeLessThan(value);
    expect(value).toBeLessThan(source);
    expect(source).toBeLessThan(stdout);
    // The source is highlighted as python: print is a builtin call, the string a string.
    expect(markup).toMatch(/<span class="cr-tok-builtin">print<\/span>/);
    expect(markup).toMatch(/<span class="cr-tok-string">&quot;hi&quot;<\/span>/);
  });

  /// A script that throws is an ordinary response: a warning, never an alert.
  it("shows a non-zero exit as a warning with stderr, not as an error", () => {
    const markup = html(
      renderer.tryRender(
        done(
          "code-runner::run",
          { lang: "python", code: "1/0" },
          runResponse({ exit_code: 1, success: false, stderr: "ZeroDivisionError: division by zero\n" }),
        ),
      ),
    );
    expect(markup).toContain('class="cr-verdict" data-cr-tone="warn"');
    expect(markup).not.toMatch(/alert|data-cr-tone="error"/);
    expect(textOf(markup)).toContain("exit 1");
    expect(markup).toContain('data-cr-stream="stderr"');
    expect(textOf(markup)).toContain("ZeroDivisionError: division by zero");
    expect(textOf(markup)).toContain("so there is no value");
  });

  /// The usual reason a call "worked" and returned nothing: the return convention differs per language.
  it("shows a null result explicitly, with the language's return convention beside it", () => {
    const python = textOf(html(renderer.tryRender(done("code-runner::run", { lang: "python", code: "2 + 2" }, runResponse({})))));
    expect(python).toContain("null");
    expect(python).toContain("result = …");
    expect(python).not.toContain("return …");
    const node = textOf(html(renderer.tryRender(done("code-runner::run", { lang: "node", code: "2 + 2" }, runResponse({})))));
    expect(node).toContain("null");
    expect(node).toContain("return …");
    expect(node).not.toContain("result = …");
  });

  /// The worker's stream cap splices a marker; a reader must see the worker cut the output, not the program.
  it("sets the truncation marker apart from the program's output", () => {
    const stdout = `${"a".repeat(50)}\n[…stdout truncated: was ~59 KB; middle omitted]\n${"z".repeat(30)}`;
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "python", code: "x" }, runResponse({ stdout }))));
    expect(markup).toMatch(/<span class="cr-marker"[^>]*><span class="cr-marker-tag">worker<\/span>\[…stdout truncated: was ~59 KB; middle omitted\]<\/span>/);
    expect(markup).toContain("a".repeat(50));
    expect(markup).toContain("z".repeat(30));
    expect(markup).toContain('<span class="cr-label-aside" data-cr-flag="worker">cut by the worker: was ~59 KB, middle omitted</span>');
  });

  /// A marker-shaped line naming the other stream is the program's text, not the worker's marker.
  it("does not take stderr's marker text printed on stdout for stdout's marker", () => {
    const stdout = "x\n[…stderr truncated: was ~1 KB; middle omitted]\ny";
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "python", code: "x" }, runResponse({ stdout }))));
    expect(markup).not.toContain("cr-marker");
  });

  /// An oversized result is replaced whole by a marker; the card says the worker dropped it.
  it("shows the omission marker as an omitted value, not as a string result", () => {
    const result =
      "<omitted: result was ~575 KB (100000 array elements); returning it whole would flood the model context — print a slice, aggregate in code, or write it to iii.files and return a summary>";
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "node", code: "return big" }, runResponse({ result }))));
    expect(markup).toContain('class="cr-omitted"');
    expect(textOf(markup)).toContain("result omitted: ~575 KB (100000 array elements)");
    expect(textOf(markup)).toContain("omitted by the worker");
  });

  /// Figures come back as base64 PNGs; the card draws them in order, the marker as a note,
  /// and never puts a non-raster type or a malformed payload into an image source.
  it("draws the run's images in order, with the worker's marker, and nothing unsafe", () => {
    const png = "iVBORw0KGgo=";
    const images = [
      { mime_type: "image/png", data: png },
      { mime_type: "image/svg+xml", data: "PHN2Zz4=" },
      { mime_type: "image/png", data: 'x" onerror="alert(1)' },
      { mime_type: "text/plain", data: "<omitted: 2 more images; a response carries at most 8 images>" },
    ];
    const markup = html(
      renderer.tryRender(done("code-runner::run", { lang: "python", code: "plt.show()" }, runResponse({ images }))),
    );
    expect(markup.match(/<img /g)?.length).toBe(1);
    expect(markup).toContain(`src="data:image/png;base64,${png}"`);
    expect(markup).not.toContain("svg+xml;base64");
    expect(markup).not.toContain("onerror");
    const text = textOf(markup);
    expect(text).toContain("3 figures");
    expect(text).toContain("figure 2: image/svg+xml, not drawn");
    expect(text).toContain("<omitted: 2 more images");
    expect(text.indexOf("3 figures")).toBeLessThan(text.indexOf("plt.show()"));
  });

  /// No images, no section.
  it("has no images section for a run that showed none", () => {
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "node", code: "return 1" }, runResponse({ result: 1 }))));
    expect(markup).not.toContain("cr-images");
  });

  /// Uploaded and collected files by name and size, the marker as a note, ids masked,
  /// and at most MAX_LISTED names per direction before "+k more".
  it("lists uploaded and collected files with sizes, bounded, ids masked", () => {
    const id = runtimeId();
    const uploaded = [
      { path: "data.csv", text: "a,b\n1,2\n" },
      { path: `in/${id}.bin`, base64: "AAEC" },
      ...Array.from({ length: MAX_LISTED + 3 }, (_, i) => ({ path: `many/${i}.txt`, text: "x" })),
    ];
    const files = [
      { path: "out/clean.csv", mime_type: "text/csv", size: 2048, base64: "YSxi" },
      { path: "", mime_type: "text/plain", size: 0, base64: "<omitted: 3 more files; a response carries at most 16 files>" },
    ];
    const markup = html(
      renderer.tryRender(done("code-runner::run", { lang: "python", code: "pass", files: uploaded }, runResponse({ files }))),
    );
    const text = textOf(markup);
    expect(text).toContain("25 in · 1 out");
    expect(text).toMatch(/indata\.csv8 B/);
    expect(text).toMatch(/in\/rt_.{4}…\.bin3 B/);
    expect(text).toContain("+5 more");
    expect(text).not.toContain(`many/${MAX_LISTED - 2}.txt`);
    expect(text).toMatch(/outout\/clean\.csv2\.0 KBdownload/);
    expect(text).toContain("<omitted: 3 more files");
    expect(markup).not.toContain(id);
  });

  /// No files, no section; a running call shows only what it uploads.
  it("has no files section without files, and no collected files before the answer", () => {
    const none = html(renderer.tryRender(done("code-runner::run", { lang: "node", code: "return 1" }, runResponse({ result: 1 }))));
    expect(none).not.toContain("cr-files");
    const running = renderer.tryRenderRunning({
      functionId: "code-runner::run",
      input: { lang: "node", code: "1", files: [{ path: "a.txt", text: "hi" }] },
      output: { files: [{ path: "b.txt", mime_type: "text/plain", size: 1, base64: "eA==" }] },
      running: true,
    });
    expect(textOf(html(running))).toContain("1 in · 0 out");
  });

  /// A guest shapes the value; one too deep for JSON.stringify must not crash the card.
  it("shows a value too deep to print as such instead of crashing", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i += 1) deep = [deep];
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "python", code: "x" }, runResponse({ result: deep }))));
    expect(textOf(markup)).toContain("too deeply nested to show here");
  });

  /// The call is in flight: the card shows the code and a running verdict, no result yet.
  it("renders a running state while the call is in flight", () => {
    const markup = html(renderer.tryRenderRunning({ functionId: "code-runner::run", input: { lang: "node", code: "return 1" }, running: true }));
    expect(markup).toContain('data-cr-tone="running"');
    expect(textOf(markup)).toContain("running…");
    expect(textOf(markup)).toContain("return 1");
    expect(textOf(markup)).not.toContain("exit");
  });

  /// Failed calls belong to the host's error view: the renderer must step aside.
  it("returns null for a failed call so the host shows its error view", () => {
    const failed = done("code-runner::run", { lang: "python", code: "x" }, { error: { code: "code-runner::timeout", message: "run exceeded 5000 ms" } });
    expect(renderer.tryRender(failed)).toBeNull();
  });

  /// Other functions keep their own renderers.
  it("matches only its four operations", () => {
    expect(renderer.isMatch("code-runner::run")).toBe(true);
    expect(renderer.isMatch("code-runner::resume")).toBe(true);
    expect(renderer.isMatch("code-runner::register_function")).toBe(true);
    expect(renderer.isMatch("code-runner::teardown")).toBe(true);
    expect(renderer.isMatch("code-runner::ui-content")).toBe(false);
    expect(renderer.isMatch("state::get")).toBe(false);
    expect(renderer.isMatch("toString")).toBe(false);
  });

  /// A run on a kept runtime often omits lang; the card still highlights and labels it, marked as a guess.
  it("guesses the language of a run that did not name one", () => {
    const markup = html(renderer.tryRender(done("code-runner::run", { runtime_id: runtimeId(), code: "result = x + 1" }, runResponse({ result: 2 }))));
    expect(textOf(markup)).toContain("python?");
    expect(textOf(markup)).toContain("in kept runtime");
  });
});

describe("register_function card", () => {
  const source = "def handler(payload):\n    return payload\n";

  /// The namespace an id claims decides what shares its runtime and what teardown removes.
  it("puts the namespace the id claims on its own line", () => {
    const markup = html(
      renderer.tryRender(done("code-runner::register_function", { function_id: "my-app::greet", lang: "python", source }, { function_id: "my-app::greet", registered: true })),
    );
    expect(markup).toMatch(/<div class="cr-fn-id">my-app::greet<\/div>/);
    expect(markup).toMatch(/<div class="cr-namespace">claims namespace <code class="cr-mono">my-app::<\/code>/);
    expect(textOf(markup)).toContain("registered");
    expect(markup).not.toContain('data-cr-note="advice"');
  });

  /// A run's own namespace (`iii.namespace`, `rt-…`) is reserved for that runtime while it lives; the card says whose it is.
  it("says when the namespace is a run's own iii.namespace", () => {
    const own = "rt-0a1b2c3d4e5f6g7h8i9j";
    const markup = html(
      renderer.tryRender(done("code-runner::register_function", { function_id: `${own}::ping`, lang: "python", source }, { function_id: `${own}::ping`, registered: true })),
    );
    const text = textOf(markup);
    expect(markup).toMatch(new RegExp(`claims namespace <code class="cr-mono">${own}::</code>`));
    expect(text).toContain(`${own}:: looks like a run's own namespace (its iii.namespace)`);
    expect(text).toContain("only guest code of its run's tree may register here");
    expect(markup).not.toContain('data-cr-note="advice"');
    // An ordinary namespace, or one merely starting with rt-, gets no such note.
    for (const id of ["my-app::greet", "rt-app::greet", "rt_0a1b2c3d4e5f6g7h8i9j::x"]) {
      const plain = textOf(html(renderer.tryRender(done("code-runner::register_function", { function_id: id, lang: "python", source }, { function_id: id, registered: true }))));
      expect(plain, id).not.toContain("iii.namespace");
    }
  });

  /// On python a source without handler fails the registration outright; the card says so before the call is approved.
  it("advises when the source defines no handler, in both languages", () => {
    const python = html(renderer.tryRenderPreview({ functionId: "code-runner::register_function", input: { function_id: "a::b", lang: "python", source: "def handle(p):\n    return p" }, pendingApproval: true }));
    expect(python).toContain('data-cr-note="advice"');
    expect(textOf(python)).toContain("def handler(payload): …");
    const node = html(renderer.tryRenderRunning({ functionId: "code-runner::register_function", input: { function_id: "a::b", lang: "node", source: "function handle(p) { return p }" }, running: true }));
    expect(node).toContain('data-cr-note="advice"');
    expect(textOf(node)).toContain("export function handler(payload)");
    // Every form the engine takes as the handler gets no advice.
    for (const source of ["export async function handler(p) { return p }", "function handler(p) { return p }", "async function handler(p) {}", "export const handler = (p) => p", "export default function (p) { return p }", "export default async (p) => p"]) {
      const ok = html(renderer.tryRenderRunning({ functionId: "code-runner::register_function", input: { function_id: "a::b", lang: "node", source }, running: true }));
      expect(ok, source).not.toContain('data-cr-note="advice"');
    }
  });
});

describe("teardown card", () => {
  /// The one question the teardown payload does not answer: which ids stopped resolving.
  it("lists the function ids that stopped resolving", () => {
    const markup = html(
      renderer.tryRender(done("code-runner::teardown", { namespace: "my-app" }, { torn_down: true, unregistered: ["my-app::greet", "my-app::bye"], namespace: "my-app::" })),
    );
    const text = textOf(markup);
    expect(text).toContain("stopped resolving");
    expect(text).toContain("2 function ids");
    expect(markup).toContain('<span class="cr-mono">my-app::greet</span>');
    expect(markup).toContain('<span class="cr-mono">my-app::bye</span>');
  });

  /// An empty list is an answer too: nothing stopped resolving.
  it("says so when no function id stopped resolving", () => {
    const id = runtimeId();
    const markup = html(renderer.tryRender(done("code-runner::teardown", { runtime_id: id }, { torn_down: true, unregistered: [], runtime_id: id })));
    expect(textOf(markup)).toContain("no function id stopped resolving");
    expect(markup).not.toContain(id);
  });
});

describe("a suspended run and the resume card", () => {
  const suspended = (fields: Record<string, unknown> = {}) =>
    runResponse({
      runtime_id: runtimeId(),
      stdout: "asking\n",
      suspended: { call_id: callId(), function_id: "billing::charge", payload: { amount: 5 } },
      ...fields,
    });

  /// A run whose code called a function that needs approval: the card waits, names the function,
  /// shows the payload and the output so far, and no null-result advice.
  it("shows a suspended run as waiting for approval, with the function, its payload and the output so far", () => {
    const answer = suspended();
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "python", code: "iii.fn.billing.charge(amount=5)" }, answer)));
    const text = textOf(markup);
    expect(markup).toContain('data-cr-tone="waiting"');
    expect(text).toContain("waiting for approval");
    expect(markup).toMatch(/<div class="cr-fn-id cr-waiting-fn">billing::charge<\/div>/);
    expect(text).toMatch(/"amount": 5/);
    expect(text).toContain("asking");
    expect(text).toContain("so far");
    expect(text).toContain("code-runner::resume");
    expect(text).not.toContain("exit 0");
    expect(text).not.toContain("result = …");
    // The waiting section comes before the code, as a result would.
    expect(text.indexOf("waiting for approval", text.indexOf("run"))).toBeLessThan(text.indexOf("iii.fn.billing"));
  });

  /// Both ids are capabilities: each a masked chip, neither anywhere in full.
  it("masks the runtime id and the call id of a suspended run", () => {
    const answer = suspended();
    const runtime = answer.runtime_id as string;
    const call = (answer.suspended as { call_id: string }).call_id;
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "node", code: "return 1" }, answer)));
    expect(markup).toContain(`<span class="cr-chip-id">${runtime.slice(0, 7)}…</span>`);
    expect(markup).toContain(`<span class="cr-chip-id">${call.slice(0, 9)}…</span>`);
    expect(markup).toContain('aria-label="call call_');
    expect(markup).not.toContain(runtime.slice(7));
    expect(markup).not.toContain(call.slice(9));
  });

  /// A guest shapes the payload: a huge one is clipped like any other value on the card.
  it("clips a huge payload like other values", () => {
    const answer = suspended({ suspended: { call_id: callId(), function_id: "billing::charge", payload: { blob: "x".repeat(MAX_DISPLAY_CHARS * 2) } } });
    const markup = html(renderer.tryRender(done("code-runner::run", { lang: "node", code: "return 1" }, answer)));
    expect(textOf(markup)).toContain("display clipped here");
    expect(markup.length).toBeLessThan(MAX_DISPLAY_CHARS + 20_000);
  });

  /// The resume card: the decision over masked ids, the reason, then the answer as the run card draws it.
  it("shows a denial with its reason, then the answer as a run's", () => {
    const runtime = runtimeId();
    const call = callId();
    const input = { runtime_id: runtime, call_id: call, approve: false, reason: "too much" };
    const markup = html(renderer.tryRender(done("code-runner::resume", input, runResponse({ result: ["denied", "forbidden"], stdout: "asking\n" }))));
    const text = textOf(markup);
    expect(text).toContain("resume");
    expect(text).toContain("denied");
    expect(text).toContain("reason: too much");
    expect(markup).toContain('data-cr-decision="deny"');
    expect(text).toContain("exit 0");
    expect(text).toMatch(/"denied",\s*"forbidden"/);
    expect(text).toContain("asking");
    expect(markup).not.toContain(runtime.slice(7));
    expect(markup).not.toContain(call.slice(9));
    expect(markup).toContain(`${call.slice(0, 9)}…`);
  });

  /// Approved, the run may reach its next such call: the resume card waits again.
  it("shows an approval, and a resume that suspends again as waiting", () => {
    const input = { runtime_id: runtimeId(), call_id: callId(), approve: true };
    const markup = html(renderer.tryRender(done("code-runner::resume", input, suspended())));
    expect(markup).toContain('data-cr-decision="approve"');
    expect(markup).toContain('data-cr-tone="waiting"');
    expect(textOf(markup)).toContain("billing::charge");
    const running = html(renderer.tryRenderRunning({ functionId: "code-runner::resume", input, running: true }));
    expect(running).toContain('data-cr-tone="running"');
    expect(textOf(running)).toContain("approved, running…");
  });

  /// A refused resume (a used call_id) is the host's error view.
  it("returns null for a failed resume", () => {
    const failed = done("code-runner::resume", { runtime_id: runtimeId(), call_id: callId(), approve: true }, { error: { code: "code-runner::invalid_request", message: "used" } });
    expect(renderer.tryRender(failed)).toBeNull();
  });
});
