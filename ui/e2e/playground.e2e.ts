// The playground end to end: the real release binary (`code-runner serve` on a
// loopback port it picks) and Debian's Chromium driven by playwright-core.
// Nothing is mocked and nothing is downloaded; a missing browser or binary
// fails the run loudly.
//
//   cargo build --release --bin code-runner && cd ui && npm run e2e
//   CODE_RUNNER_BIN=…  CHROMIUM=…  override the two paths.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium, type BrowserContext, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repo = resolve(__dirname, "../..");
const binary = process.env.CODE_RUNNER_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(repo, "target"), "release", "code-runner");
const browserPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const artifacts = join(__dirname, "artifacts");
/** Any full runtime id, as the worker mints them. */
const FULL_ID = /rt_[A-Za-z0-9]{32}/;
/** Any full snapshot id, as the worker mints them. */
const FULL_SNAPSHOT_ID = /sn_[A-Za-z0-9]{32}/;
/** Any full call id of a suspended run, as the worker mints them. */
const FULL_CALL_ID = /call_[A-Za-z0-9]{24}/;
/** The server's configuration: every billing::* call a guest makes waits for approval. */
const CONFIG = 'approval_required: ["billing::*"]\n';
/** Generous: a cold python boot on a busy 2-core machine. */
const ANSWER_MS = 90_000;

let server: ChildProcessWithoutNullStreams | undefined;
let serverLog = "";
let baseUrl = "";
let context: BrowserContext | undefined;
let page: Page;
const temp = mkdtempSync(join(tmpdir(), "code-runner-e2e-"));
const pageErrors: string[] = [];
const foreignRequests: string[] = [];
/** Every runtime_id the server handed the page, read off the wire. */
const seenIds = new Set<string>();
/** Every call_id of a suspended run the server handed the page. */
const seenCallIds = new Set<string>();

function startServer(): Promise<string> {
  return new Promise((resolveUrl, reject) => {
    const config = join(temp, "code-runner.yaml");
    writeFileSync(config, CONFIG);
    const child = spawn(binary, ["serve", "--listen", "127.0.0.1:0", "--data-dir", join(temp, "data"), "--config", config], {
      env: { ...process.env, CODE_RUNNER_LOG: "info" },
    });
    server = child;
    const timer = setTimeout(() => reject(new Error(`code-runner serve did not start within 90 s:\n${serverLog}`)), 90_000);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      serverLog += chunk;
      const match = /serving on (http:\/\/[0-9.:]+)/.exec(serverLog);
      if (match?.[1]) {
        clearTimeout(timer);
        resolveUrl(match[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`code-runner serve exited (${code}) before serving:\n${serverLog}`));
    });
  });
}

/** The newest card in the feed, once its call has answered. */
async function newestAnswer(): Promise<Locator> {
  const card = page.locator(".pg-feed .pg-entry").first().locator(".cr-card");
  await expect.poll(async () => card.locator('.cr-verdict[data-cr-tone="running"]').count(), { timeout: ANSWER_MS }).toBe(0);
  return card;
}

async function writeCode(code: string) {
  await page.getByLabel("code", { exact: true }).fill(code);
}

/** Asserts no full runtime id is anywhere in the page: its text, its markup, or its attributes. */
async function assertNoFullIdInPage() {
  const text = await page.evaluate(() => document.body.innerText);
  const markup = await page.evaluate(() => document.documentElement.outerHTML);
  expect(text).not.toMatch(FULL_ID);
  expect(markup).not.toMatch(FULL_ID);
  expect(text).not.toMatch(FULL_CALL_ID);
  expect(markup).not.toMatch(FULL_CALL_ID);
  expect(text).not.toMatch(FULL_SNAPSHOT_ID);
  expect(markup).not.toMatch(FULL_SNAPSHOT_ID);
  for (const id of seenCallIds) {
    expect(text).not.toContain(id.slice(9));
    expect(markup).not.toContain(id.slice(9));
  }
  for (const id of seenIds) {
    expect(text).not.toContain(id.slice(7));
    expect(markup).not.toContain(id.slice(7));
  }
}

beforeAll(async () => {
  if (!existsSync(binary)) {
    throw new Error(`no code-runner binary at ${binary}: run \`cargo build --release --bin code-runner\` (or set CODE_RUNNER_BIN)`);
  }
  if (!existsSync(browserPath)) {
    throw new Error(`no Chromium at ${browserPath}: install Debian's package (\`apt-get install -y chromium\`) or set CHROMIUM`);
  }
  baseUrl = await startServer();
  context = await chromium.launchPersistentContext(join(temp, "profile"), {
    executablePath: browserPath,
    headless: true,
    viewport: { width: 1360, height: 1000 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
  page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  page.on("console", (message) => {
    // A non-2xx answer logs "Failed to load resource"; the cards show those on purpose.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) pageErrors.push(message.text());
  });
  page.on("request", (request) => {
    if (!request.url().startsWith(baseUrl) && !request.url().startsWith("data:")) foreignRequests.push(request.url());
  });
  page.on("response", async (response) => {
    if (!response.url().includes("/v1/call/")) return;
    const body = await response.text().catch(() => "");
    for (const match of body.matchAll(new RegExp(FULL_ID.source, "g"))) seenIds.add(match[0]);
    for (const match of body.matchAll(new RegExp(FULL_CALL_ID.source, "g"))) seenCallIds.add(match[0]);
  });
  await page.goto(`${baseUrl}/`);
  await page.getByRole("button", { name: "Run", exact: true }).waitFor();
}, 150_000);

afterAll(async () => {
  await context?.close().catch(() => {});
  if (server && server.exitCode === null) {
    const exited = new Promise((done) => server!.once("exit", done));
    server.kill("SIGTERM");
    await Promise.race([exited, new Promise((done) => setTimeout(done, 15_000))]);
    if (server.exitCode === null) server.kill("SIGKILL");
  }
  rmSync(temp, { recursive: true, force: true });
});

describe("the playground on a real code-runner serve", () => {
  /// The "done when": a new user runs print("hi"); result = 2 + 2 and sees the verdict, 4 and hi.
  it("runs python one-shot and shows the verdict, the value and stdout", async () => {
    await writeCode('print("hi"); result = 2 + 2');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    await expect.poll(() => card.locator(".cr-verdict").innerText()).toMatch(/^exit 0 · \d/);
    expect(await card.locator(".cr-verdict").getAttribute("data-cr-tone")).toBe("ok");
    expect((await card.locator(".cr-value").innerText()).trim()).toBe("4");
    expect(await card.locator('.cr-term[data-cr-stream="stdout"]').innerText()).toBe("hi\n");
    expect(await card.locator(".cr-source").innerText()).toContain('print("hi"); result = 2 + 2');
    expect(await card.locator(".cr-source .cr-tok-builtin").first().innerText()).toBe("print");
  });

  /// A run's output shows while it runs (server-sent events), then the card takes over.
  it("shows output live while a run is still running", async () => {
    await writeCode('import time\nprint("first", flush=True)\ntime.sleep(3)\nprint("second")\nresult = 1');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const entry = page.locator(".pg-feed .pg-entry").first();
    await expect.poll(() => entry.locator('.pg-live-stream[data-stream="stdout"]').innerText().catch(() => ""), { timeout: ANSWER_MS }).toBe("first\n");
    expect(await entry.locator('.cr-verdict[data-cr-tone="running"]').count()).toBe(1);
    const card = await newestAnswer();
    expect(await card.locator('.cr-term[data-cr-stream="stdout"]').innerText()).toBe("first\nsecond\n");
    expect(await entry.locator(".pg-live").count()).toBe(0);
  });

  /// The worker caps a flood of output; the card marks where it cut, apart from the program's lines.
  it("marks the worker's truncation of a flooded stdout", async () => {
    await writeCode('for i in range(4000):\n    print(f"line {i}")\nresult = "done"');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    const marker = card.locator('.cr-term[data-cr-stream="stdout"] .cr-marker');
    expect(await marker.count()).toBe(1);
    expect(await marker.innerText()).toMatch(/\[…stdout truncated: was ~\d+ KB; middle omitted\]/);
    expect(await card.locator(".cr-section", { hasText: "stdout" }).locator(".cr-label-aside").innerText()).toMatch(/^cut by the worker/);
    const output = await card.locator('.cr-term[data-cr-stream="stdout"]').innerText();
    expect(output.startsWith("line 0\n")).toBe(true);
    expect(output.trimEnd().endsWith("line 3999")).toBe(true);
  });

  /// Python's data stack: a figure the program shows is drawn on the card, as the browser decodes it.
  it("draws a matplotlib figure the program showed", async () => {
    await writeCode("import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=100)\nplt.plot([1, 3, 2])\nplt.show()\nresult = 'drawn'");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    const image = card.locator("img.cr-image");
    expect(await image.count()).toBe(1);
    await expect.poll(() => image.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(300);
    expect(await image.evaluate((img: HTMLImageElement) => img.naturalHeight)).toBe(200);
    expect(await card.locator(".cr-section", { hasText: "images" }).locator(".cr-label-aside").innerText()).toBe("1 figure");
  });

  /// A script that fails is a response: the card warns, shows stderr and no value.
  it("shows a failing script as a warning with its traceback", async () => {
    await writeCode('import json\nprint("parsing")\njson.loads("{not json")\n');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    expect(await card.locator(".cr-verdict").getAttribute("data-cr-tone")).toBe("warn");
    expect(await card.locator(".cr-verdict").innerText()).toMatch(/^exit 1/);
    expect(await card.locator('.cr-term[data-cr-stream="stderr"]').innerText()).toContain("JSONDecodeError");
  });

  /// Files in and out: a CSV attached through the file input, transformed by the code into a new
  /// file the run collects, listed on the card and downloaded through the browser byte for byte.
  it("uploads a CSV, and downloads the file the code made from it", async () => {
    const csv = "city,pop\nLyon,522\nNice,342\n";
    await page.getByLabel("attach files").setInputFiles({ name: "cities.csv", mimeType: "text/csv", buffer: Buffer.from(csv) });
    const attached = page.getByRole("list", { name: "attached files" });
    await expect.poll(() => attached.innerText().catch(() => "")).toMatch(/cities\.csv\s*27 B/);
    await page.getByLabel("collect (globs, comma-separated)").fill("out/*.csv");
    await writeCode(
      "import csv, os\nrows = list(csv.DictReader(open('cities.csv')))\nos.makedirs('out', exist_ok=True)\n" +
        "with open('out/big.csv', 'w', newline='') as f:\n    w = csv.writer(f)\n    w.writerow(['city', 'pop_k'])\n" +
        "    w.writerows([r['city'].upper(), int(r['pop']) // 100] for r in rows)\nresult = len(rows)",
    );
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    expect((await card.locator(".cr-value").innerText()).trim()).toBe("2");
    const files = card.locator(".cr-section", { hasText: "files" });
    expect(await files.locator(".cr-label-aside").innerText()).toBe("1 in · 1 out");
    expect(await card.getByRole("list", { name: "uploaded files" }).innerText()).toMatch(/cities\.csv\s*27 B/);
    const collected = card.getByRole("list", { name: "collected files" });
    expect(await collected.innerText()).toMatch(/out\/big\.csv\s*\d+ B/);
    const [download] = await Promise.all([page.waitForEvent("download"), collected.getByRole("button", { name: "download" }).click()]);
    expect(download.suggestedFilename()).toBe("big.csv");
    const saved = readFileSync((await download.path())!, "utf8");
    expect(saved).toBe("city,pop_k\r\nLYON,5\r\nNICE,3\r\n");
    await attached.getByRole("button", { name: "remove cities.csv" }).click();
    expect(await page.getByRole("list", { name: "attached files" }).count()).toBe(0);
    await page.getByLabel("collect (globs, comma-separated)").fill("");
  });

  /// Keeps a runtime made by `setup` (whose value is "trunk"), forks it with the Fork button (the
  /// snapshot's id masked), runs `grow` on the fork (then "trunk fork") and `read` on the first
  /// (still "trunk"), then tears both down.
  const forkTwoWays = async (setup: string, grow: string, read: string) => {
    await writeCode(setup);
    await page.getByRole("button", { name: "Run & keep" }).click();
    expect((await (await newestAnswer()).locator(".cr-value").innerText()).trim()).toBe("trunk");
    await page.getByRole("button", { name: "Fork" }).click();
    const restored = await newestAnswer();
    await expect.poll(() => restored.locator(".cr-verdict").innerText(), { timeout: ANSWER_MS }).toBe("restored");
    expect(await restored.locator(".cr-snapshot-id").innerText()).toMatch(/^sn_[A-Za-z0-9]{4}…$/);
    expect(await page.locator(".pg-kept-row").count()).toBe(2);
    await writeCode(grow);
    await page.getByRole("button", { name: "Run here" }).first().click();
    expect((await (await newestAnswer()).locator(".cr-value").innerText()).trim()).toBe("trunk fork");
    await writeCode(read);
    await page.getByRole("button", { name: "Run here" }).nth(1).click();
    expect((await (await newestAnswer()).locator(".cr-value").innerText()).trim()).toBe("trunk");
    await assertNoFullIdInPage();
    for (const left of [1, 0]) {
      await page.getByRole("button", { name: "Tear down", exact: true }).first().click();
      await expect.poll(() => page.locator(".pg-kept-row").count(), { timeout: ANSWER_MS }).toBe(left);
    }
  };

  /// A kept python runtime forks: a snapshot, restored as a second kept runtime
  /// that starts where the first was and goes its own way.
  it("forks a kept python runtime into a second one", async () => {
    await forkTwoWays("branch = 'trunk'\nresult = branch", "branch += ' fork'\nresult = branch", "result = branch");
  });

  /// A kept node runtime forks too: its snapshot is its turn ledger, replayed into the fork.
  it("forks a kept node runtime into a second one", async () => {
    await page.getByRole("radio", { name: /^node/ }).click();
    await forkTwoWays(
      "globalThis.branch = ['trunk'];\nreturn branch.join(' ');",
      "branch.push('fork');\nreturn branch.join(' ');",
      "return branch.join(' ');",
    );
    await page.getByRole("radio", { name: /^python/ }).click();
  });

  /// runtime_id is a capability: the kept run shows a truncated chip, the page never holds the full id,
  /// and only an explicit click hands it over.
  it("keeps a runtime behind a truncated chip, reuses it and tears it down", async () => {
    await writeCode("counter = 41\nresult = counter");
    const before = new Set(seenIds);
    await page.getByRole("button", { name: "Run & keep" }).click();
    const kept = await newestAnswer();
    expect((await kept.locator(".cr-value").innerText()).trim()).toBe("41");
    const chip = kept.locator(".cr-chip-id");
    expect(await chip.innerText()).toMatch(/^rt_[A-Za-z0-9]{4}…$/);
    const minted = [...seenIds].filter((seen) => !before.has(seen));
    expect(minted.length).toBe(1);
    const [id] = minted;
    await assertNoFullIdInPage();

    await writeCode(`result = counter + 1\nprint("I am ${id}")`);
    await page.getByRole("button", { name: "Run here" }).click();
    const again = await newestAnswer();
    expect((await again.locator(".cr-value").innerText()).trim()).toBe("42");
    expect(await again.locator('.cr-term[data-cr-stream="stdout"]').innerText()).toBe(`I am ${id!.slice(0, 7)}…\n`);
    // The editor holds what the user typed; everything else is masked. Clear it before checking the page.
    await writeCode("result = 1");
    await assertNoFullIdInPage();

    await page.locator(".pg-kept .cr-chip").first().click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(id);
    await assertNoFullIdInPage();

    await page.getByRole("button", { name: "Tear down", exact: true }).click();
    const teardown = await newestAnswer();
    expect(await teardown.locator(".cr-verdict").innerText()).toBe("torn down");
    expect(await teardown.locator(".cr-chip-id").innerText()).toMatch(/^rt_[A-Za-z0-9]{4}…$/);
    expect(await page.locator(".pg-kept").count()).toBe(0);
    await assertNoFullIdInPage();

    mkdirSync(artifacts, { recursive: true });
    const shot = join(artifacts, "playground.png");
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot: ${shot}`);
  });

  /// The playground offers node whether or not this build has its engine; without one it shows the server's error.
  it("runs node, or shows the server's error when this build has no node engine", async () => {
    const health = (await (await fetch(`${baseUrl}/healthz`)).json()) as { engines?: Record<string, string> };
    await page.getByRole("radio", { name: /^node/ }).click();
    await writeCode('console.log("hi");\nreturn 2 + 2;');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    if (health.engines?.node === "ready") {
      expect(await card.locator(".cr-verdict").innerText()).toMatch(/^exit 0/);
      expect((await card.locator(".cr-value").innerText()).trim()).toBe("4");
      expect(await card.locator('.cr-term[data-cr-stream="stdout"]').innerText()).toBe("hi\n");
    } else {
      expect(await card.locator(".pg-error-code").innerText()).toBe("code-runner::engine");
      expect(await card.locator(".pg-error-message").innerText()).toContain("node");
    }
    await page.getByRole("radio", { name: /^python/ }).click();
  });

  /// TypeScript runs on the node engine with its types stripped; its code is highlighted as
  /// TypeScript and the card's quiet usage line shows what the run cost.
  it("runs typescript, highlighted, with its usage under the verdict", async () => {
    const health = (await (await fetch(`${baseUrl}/healthz`)).json()) as { engines?: Record<string, string> };
    if (health.engines?.node !== "ready") return;
    await page.getByRole("radio", { name: /^typescript/ }).click();
    await writeCode("interface P { x: number }\nconst p: P = { x: 2 };\nreturn (p.x + 2) as number;");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const card = await newestAnswer();
    expect(await card.locator(".cr-verdict").innerText()).toMatch(/^exit 0/);
    expect((await card.locator(".cr-value").innerText()).trim()).toBe("4");
    expect(await card.locator(".cr-verdict-usage").innerText()).toMatch(/^cpu .+ · peak .+B$/);
    expect(await card.locator(".cr-tok-keyword", { hasText: "interface" }).count()).toBeGreaterThan(0);
    await page.getByRole("radio", { name: /^python/ }).click();
  });

  /// Register a function and call it, when this build has register_function; otherwise the server's answer shows.
  it("registers a python function and calls it", async () => {
    const catalog = (await (await fetch(`${baseUrl}/v1/functions`)).json()) as { functions: { function_id: string }[] };
    const available = catalog.functions.some((f) => f.function_id === "code-runner::register_function");
    await page.getByRole("tab", { name: "Register a function" }).click();
    await page.getByRole("button", { name: "Register", exact: true }).click();
    const card = await newestAnswer();
    if (!available) {
      expect(await card.locator(".pg-error-code").innerText()).toBe("function_not_found");
      await page.getByRole("tab", { name: "Run code" }).click();
      return;
    }
    expect(await card.locator(".cr-verdict").innerText()).toBe("registered");
    expect(await card.locator(".cr-namespace").innerText()).toContain("playground::");
    await page.getByRole("button", { name: "Call", exact: true }).click();
    const answer = await newestAnswer();
    expect(await answer.innerText()).toContain("hello, playground");
    await page.getByRole("button", { name: "Tear down namespace" }).click();
    const teardown = await newestAnswer();
    expect(await teardown.locator(".cr-ids").innerText()).toContain("playground::greet");
    await page.getByRole("tab", { name: "Run code" }).click();
  });

  /// Approvals: a guest's call of billing::charge (approval_required in the server's configuration)
  /// suspends the run; the card waits, naming the call; Deny with a reason fails the guest's call
  /// with it, Approve lets it reach the handler. Neither id is ever in the page in full.
  it("suspends a run on a call that needs approval, then denies and approves it", async () => {
    const registered = await fetch(`${baseUrl}/v1/call/code-runner::register_function`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ function_id: "billing::charge", lang: "python", source: "def handler(payload):\n    return f\"charged {payload['amount']}\"\n" }),
    });
    expect(await registered.json()).toEqual({ function_id: "billing::charge", registered: true });
    const code =
      "print('asking')\ntry:\n    r = iii.fn.billing.charge(amount=5)\nexcept IIIError as e:\n    r = ['denied', e.message]\nresult = r";
    await writeCode(code);

    for (const approve of [false, true]) {
      const before = seenCallIds.size;
      await page.getByRole("button", { name: "Run", exact: true }).click();
      const waiting = await newestAnswer();
      expect(await waiting.locator(".cr-verdict").getAttribute("data-cr-tone")).toBe("waiting");
      expect(await waiting.locator(".cr-verdict").innerText()).toMatch(/^waiting for approval/);
      expect(await waiting.locator(".cr-waiting-fn").innerText()).toBe("billing::charge");
      expect(JSON.parse(await waiting.locator(".cr-section", { hasText: "waiting for approval" }).locator(".cr-value").innerText())).toEqual({ amount: 5 });
      expect(await waiting.locator('.cr-term[data-cr-stream="stdout"]').innerText()).toBe("asking\n");
      expect(seenCallIds.size).toBe(before + 1);
      expect(await waiting.locator(".cr-chip-id").allInnerTexts()).toEqual(
        expect.arrayContaining([expect.stringMatching(/^rt_[A-Za-z0-9]{4}…$/), expect.stringMatching(/^call_[A-Za-z0-9]{4}…$/)]),
      );
      await assertNoFullIdInPage();

      const panel = page.locator(".pg-feed .pg-entry").first().getByRole("group", { name: "approval" });
      expect(await panel.innerText()).toContain("billing::charge waits for your approval");
      if (!approve) {
        await panel.getByLabel("reason (optional)").fill("too much for a test");
        mkdirSync(artifacts, { recursive: true });
        const shot = join(artifacts, "playground-approval.png");
        await page.locator(".pg-feed .pg-entry").first().screenshot({ path: shot });
        console.log(`screenshot (approval): ${shot}`);
      }
      await panel.getByRole("button", { name: approve ? "Approve" : "Deny" }).click();
      const resumed = await newestAnswer();
      expect(await resumed.locator(".cr-op").innerText()).toBe("resume");
      expect(await resumed.locator(".cr-verdict").innerText()).toMatch(/^exit 0/);
      const value = await resumed.locator(".cr-value").innerText();
      if (approve) {
        // A string result is shown as its text.
        expect(value.trim()).toBe("charged 5");
      } else {
        expect(JSON.parse(value)).toEqual(["denied", expect.stringContaining("too much for a test")]);
        expect(await resumed.locator(".cr-reason").innerText()).toBe("reason: too much for a test");
      }
      // The suspended entry says what was decided and offers the buttons no more.
      const decided = page.locator(".pg-feed .pg-entry").nth(1).locator(".pg-approval");
      expect(await decided.innerText()).toMatch(approve ? /^approved: billing::charge/ : /^denied: billing::charge/);
      expect(await decided.getByRole("button").count()).toBe(0);
      await assertNoFullIdInPage();
    }
    await writeCode("result = 1");
  });

  /// The page works offline by construction: it asked nothing of any other origin and raised no script error.
  it("loaded nothing from another origin and logged no script error", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    mkdirSync(artifacts, { recursive: true });
    const shot = join(artifacts, "playground-dark.png");
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot (dark): ${shot}`);
    expect(foreignRequests).toEqual([]);
    expect(pageErrors).toEqual([]);
    await assertNoFullIdInPage();
  });
});
