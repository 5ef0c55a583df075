// ghostline in a real VS Code: code-server in headless Chromium (test/browser-harness.ts) with
// the freshly packaged .vsix installed, the real server and the test model. A person's session:
// trust the folder, watch the status bar reach "ready", open a Python file, type into a
// function body, see the suggestion as ghost text, accept it with Tab; change a setting and see
// the server act on it; toggle completions from the status bar; list and apply a code action.
// Every step leaves a screenshot in target/ui-artifacts/vscode/ (git-ignored; a CI artifact).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before } from "node:test";
import { promisify } from "node:util";

import { Harness, cursor, ghostText, note, repoRoot, startVsCode, statusItem, stepsOf, until } from "./browser-harness";

const run = promisify(execFile);
const FILE = "stats.py";
const source = readFileSync(join(repoRoot, "fixtures", "vscode", FILE), "utf8");
/** What the person types over `pass` in `stdev`'s body. */
const TYPED = "return math.";
/** The model's suggestion there (the CLI gives the same; checked below). */
const SUGGESTION = /^sqrt\(/;
/** Typing delay per key, like a quick typist. */
const KEY_DELAY = 60;
/** Generous: the 2-core CI machine is shared, and a suggestion can take seconds under load. */
const SUGGESTION_MS = 120_000;
/** How long "completions off" waits for ghost text not to come (its control, on, must see it come). */
const OFF_WAIT_MS = 15_000;

let h: Harness;
let ready = false;

const step = stepsOf(() => h);

function requireReady() {
  assert.ok(ready, "an earlier step failed: the editor is not in the state this step needs");
}

before(async () => {
  h = await startVsCode({ [FILE]: source });
});

after(async () => {
  await h?.close();
});

step("the workbench loads and the folder is trusted", async () => {
  const { page } = h;
  await h.shot("workbench");
  // A fresh user-data-dir: VS Code asks whether to trust the folder's authors. Until it is
  // trusted, extensions without untrusted-workspace support (ghostline) stay disabled.
  const trust = page.getByRole("button", { name: /Yes, I trust the authors/ });
  await trust.waitFor({ timeout: 60_000 });
  await h.shot("trust-prompt");
  // Not trusted yet: ghostline has not started (no status-bar item).
  assert.equal(await statusItem(page).count(), 0, "ghostline runs only in a trusted folder");
  await trust.click();
  await page.getByRole("button", { name: /Yes, I trust the authors/ }).waitFor({ state: "detached", timeout: 30_000 });
  // Restricted mode shows a status-bar entry; trusted, it is gone.
  await until(
    () => "the Restricted Mode indicator to go",
    async () => (await page.locator('[id="status.workspaceTrust"]').count()) === 0 || "gone",
    15_000,
  );
});

step("the status bar shows the model loading, then ready", async () => {
  const { page } = h;
  const item = statusItem(page);
  await item.waitFor({ timeout: 60_000 });
  note(`status bar: ${JSON.stringify(await item.innerText())}`);
  // Ready: the sparkle icon (loading spins, errors show the error icon).
  await until(
    async () => `the ready icon; the item shows ${JSON.stringify(await item.innerText().catch(() => "?"))}`,
    async () => {
      if ((await item.locator(".codicon-error, .codicon-debug-stop").count()) > 0) {
        const tip = await item.getAttribute("aria-label");
        throw new Error(`the status bar shows an error: ${tip}`);
      }
      return (await item.locator(".codicon-sparkle").count()) > 0;
    },
    120_000,
  );
  await item.hover();
  const hover = page.locator(".monaco-hover, .workbench-hover").filter({ hasText: "model ready" }).first();
  await hover.waitFor({ timeout: 15_000 });
  note(`status hover: ${JSON.stringify((await hover.innerText()).replace(/\n/g, " | "))}`);
  await h.shot("status-ready");
  await page.mouse.move(700, 400);
  // The server's log reaches the ghostline output at its own levels: its INFO lines are not
  // errors (vscode-languageclient's default logs all of stderr as errors).
  const log = await until(() => "the ghostline output log", async () => /model ready/.test(h.outputLog()) && h.outputLog(), 10_000);
  assert.match(log, /\[info\] ghostline::model::llama: model ready/, "the server's INFO line, logged as info");
  assert.doesNotMatch(log, /\[error\].*\bINFO\b/, "no INFO line of the server logged as an error");
  ready = true;
});

step("typing in a function body shows ghostline's suggestion as ghost text; Tab accepts it", async () => {
  requireReady();
  ready = false;
  const { page } = h;
  // Open the file as a person would: Quick Open.
  await page.locator(".monaco-workbench").click({ position: { x: 700, y: 400 } });
  await page.keyboard.press("Control+P");
  await page.keyboard.type(FILE, { delay: KEY_DELAY });
  await page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: FILE }).first().waitFor();
  await page.keyboard.press("Enter");
  const tab = page.locator(".tab").filter({ hasText: FILE });
  await tab.waitFor();
  const editor = page.locator(".editor-instance .monaco-editor").first();
  await editor.locator(".view-line").filter({ hasText: "def stdev" }).waitFor();

  // `pass` in stdev's body: double-click selects the word, typing replaces it.
  const passLine = editor.locator(".view-line").filter({ hasText: /^\s*pass\s*$/ }).first();
  await passLine.locator("span span").filter({ hasText: "pass" }).first().dblclick();
  await page.keyboard.type(TYPED.slice(0, -1), { delay: KEY_DELAY });
  // Just before the last key goes down: any request VS Code makes for what was typed comes later.
  const lastKey = Date.now();
  await page.keyboard.press(TYPED.slice(-1), { delay: KEY_DELAY });
  const at = await cursor(page);
  note(`typed ${JSON.stringify(TYPED)}; cursor at ${at.line}:${at.character}`);
  assert.equal(at.character, 4 + TYPED.length, "the cursor is after what was typed");
  await h.shot("typed");

  const ghost = await until(
    () => "ghost text in the editor",
    async () => ghostText(page),
    SUGGESTION_MS,
  );
  note(`ghost text: ${JSON.stringify(ghost)}`);
  await h.shot("ghost-text");
  assert.match(ghost, SUGGESTION, "the test model's suggestion after `return math.`");

  // The status bar shows the suggestion's latency: that of a request made after the last key
  // (VS Code cancels those of earlier keys, and cancelled ones are not shown), so no longer
  // than the time since that key.
  const shown = await until(
    async () => `a latency in the status bar, got ${JSON.stringify(await statusItem(page).innerText())}`,
    async () => /ghostline (\d+) ms/.exec(await statusItem(page).innerText()) ?? undefined,
    10_000,
  );
  const since = Date.now() - lastKey;
  note(`status bar latency ${shown[1]} ms; ${since} ms since the last key`);
  assert.ok(Number(shown[1]) <= since, `the latency (${shown[1]} ms) is within the ${since} ms since the last key`);

  // The same engine without an editor, on the same text: the ghost text is ghostline's.
  const typedSource = source.replace(/^    pass$/m, `    ${TYPED}`);
  const snapshot = join(h.workspace, "..", "typed.py");
  writeFileSync(snapshot, typedSource);
  const cli = await run(h.bin, ["complete", snapshot, "--line", String(at.line), "--character", String(at.character), "--json", "--model", h.model], {
    timeout: SUGGESTION_MS,
  });
  const expected = JSON.parse(cli.stdout).text as string;
  note(`ghostline complete: ${JSON.stringify(expected)}`);
  assert.equal(ghost.split("\n")[0], expected.split("\n")[0], "VS Code shows what the engine suggests");

  await page.keyboard.press("Tab");
  await until(
    () => "the ghost text to be accepted",
    async () => (await ghostText(page)) === "" && (await editor.locator(".view-line").filter({ hasText: `${TYPED}${expected.split("\n")[0]}` }).count()) > 0,
    10_000,
  );
  await h.shot("accepted");
  // Read the document back: save it and read the file.
  await page.keyboard.press("Control+S");
  const file = join(h.workspace, FILE);
  const saved = await until(
    () => `${FILE} saved with the suggestion`,
    async () => {
      const text = readFileSync(file, "utf8");
      return text.includes(`    ${TYPED}${expected}`) && text;
    },
    10_000,
  );
  assert.equal(saved, source.replace(/^    pass$/m, `    ${TYPED}${expected}`), "exactly the suggestion was inserted");
  ready = true;
});

step("the accept reached the server: `ghostline stats` shows it, with retention and no code", async () => {
  requireReady();
  // VS Code ran the item's command after Tab; the server checks retention 1 s and 2 s later.
  const row = await until(
    () => `an accept with its retention in ${h.statsDb}`,
    async () => {
      const out = await run(h.bin, ["stats", "--json", "--since", "all", "--db", h.statsDb]);
      const first = JSON.parse(out.stdout).rows[0];
      return first && first.accepted >= 1 && first.retained_5m !== null && first;
    },
    30_000,
  );
  note(`stats: ${JSON.stringify(row)}`);
  assert.equal(row.language, "python");
  assert.equal(row.accepted, 1, "one suggestion accepted");
  assert.ok(row.accepted_chars > 0 && row.shown >= 1, JSON.stringify(row));
  // Saved and left alone since the accept: all of it is still there.
  assert.equal(row.retained_30s, 1);
  assert.equal(row.retained_5m, 1);
  const bytes = readFileSync(h.statsDb).toString("latin1");
  assert.ok(!bytes.includes(FILE) && !bytes.includes(TYPED), "no file name or code in the database");
});

// Decoding ahead where the cursor rests (issue 16): VS Code asks for the code actions at the
// cursor whenever it moves (its light bulb), and that request is what tells the server where the
// cursor is before any key: the prompt there is decoded while the user reads.
step("a click moves the cursor: VS Code asks for the code actions there, and the server decodes the prompt where it rests", async () => {
  requireReady();
  const { page } = h;
  const editor = page.locator(".editor-instance .monaco-editor").first();
  const rests = () => [...h.outputLog().matchAll(/decoding the prompt where the cursor rests line=(\d+) character=(\d+)/g)].map((m) => `${m[1]}:${m[2]}`);
  const before = rests().length;
  // A line of `variance`, above the edit: a mouse click, no key.
  await editor.locator(".view-line").filter({ hasText: "m = mean(values)" }).first().click();
  const line = source.split("\n").findIndex((l) => l.includes("m = mean(values)"));
  // The status bar shows the new position a moment after the click.
  const at = await until(
    async () => `the cursor on line ${line}, the status bar says ${JSON.stringify(await cursor(page))}`,
    async () => {
      const c = await cursor(page);
      return c.line === line && c;
    },
    10_000,
  );
  const seen = await until(
    () => `the server's DEBUG line for ${at.line}:${at.character}; after the click it logged ${JSON.stringify(rests().slice(before))}`,
    async () => rests().slice(before).includes(`${at.line}:${at.character}`) && rests().slice(before),
    30_000,
  );
  note(`prompts decoded where the cursor rested since the click: ${JSON.stringify(seen)}`);
  await h.shot("cursor-rests");
  // What that bought: a suggestion asked for there, with no key in between (Trigger Inline
  // Suggestion from the palette), finds its whole prompt in the KV cache and decodes only the
  // last token, whose logits start the generation. The timings are read once the server logged
  // its answer (or, for an empty one, after 15 s): the palette opened to read them would cancel
  // a request still running, and then it is asked again.
  const answered = () => [...h.outputLog().matchAll(/ghostline::lsp::completion: suggestion ttft_ms=/g)].length;
  const t = await until(
    () => `ghostline/lastTimings for a request at ${at.line}:${at.character}`,
    async () => {
      const before = answered();
      await palette("Trigger Inline Suggestion");
      const deadline = Date.now() + 15_000;
      while (answered() === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      const t = await lastTimings();
      return t.position?.line === at.line && t.position?.character === at.character && t;
    },
    SUGGESTION_MS,
    500,
  );
  note(`the request where the cursor rested: ${JSON.stringify(t.timings)}`);
  assert.equal(t.timings.cache, null, `answered by the model, not a cache: ${JSON.stringify(t.timings)}`);
  assert.ok(t.timings.prompt_tokens > 20, JSON.stringify(t.timings));
  assert.ok(t.timings.prefill_tokens <= 1 && t.timings.reused_tokens === t.timings.prompt_tokens - t.timings.prefill_tokens, `the prompt decoded at rest was not reused: ${JSON.stringify(t.timings)}`);
});

/** Types `text` at the end of a new line under `after`, and returns the ghost text that appears. */
async function typeOnNewLine(afterLine: RegExp, text: string): Promise<void> {
  const { page } = h;
  const editor = page.locator(".editor-instance .monaco-editor").first();
  await editor.locator(".view-line").filter({ hasText: afterLine }).first().click();
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  await page.keyboard.type(text, { delay: KEY_DELAY });
}

const UNREADABLE = Symbol("settings.json is being written");
/** One user setting as VS Code saved it (UNREADABLE while the file is being written). */
function savedSetting(key: string): unknown {
  try {
    return JSON.parse(readFileSync(h.settingsFile, "utf8"))[key];
  } catch {
    return UNREADABLE;
  }
}

/** Runs a command from the palette (F1), as a person would. */
async function palette(command: string): Promise<void> {
  const { page } = h;
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await page.keyboard.type(command, { delay: 10 });
  await page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: command }).first().waitFor();
  await page.keyboard.press("Enter");
}

/** What `ghostline/lastTimings` says now: "ghostline: Show the Last Completion's Timings" from the
 * palette, read back from the line it writes to the ghostline output (figures and file paths;
 * no code without `ghostline.debug.logCode`). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function lastTimings(): Promise<any> {
  const lines = () => [...h.outputLog().matchAll(/ghostline\/lastTimings: (\{.*\})\s*$/gm)].map((m) => m[1]);
  const before = lines().length;
  await palette("ghostline: Show the Last Completion's Timings");
  const line = await until(() => "a ghostline/lastTimings line in the ghostline output", async () => lines().length > before && lines()[lines().length - 1], 10_000);
  return JSON.parse(line);
}

/** Trigger Inline Suggestion, then waits for the server to answer it (its DEBUG line for a
 * suggestion; the palette opened before that would cancel the request). */
async function triggerAnswered(): Promise<void> {
  const answered = () => [...h.outputLog().matchAll(/ghostline::lsp::completion: suggestion ttft_ms=/g)].length;
  const before = answered();
  await palette("Trigger Inline Suggestion");
  await until(() => "the server's answer to Trigger Inline Suggestion", async () => answered() > before, SUGGESTION_MS);
}

/** Asks for a suggestion again (Trigger Inline Suggestion) until `accept` likes it. */
async function suggestionWhere(accept: (ghost: string) => boolean, what: string, ms = SUGGESTION_MS): Promise<string> {
  const { page } = h;
  let last = "";
  return until(
    () => `${what}; last ghost text ${JSON.stringify(last)}`,
    async () => {
      last = await ghostText(page);
      if (last && accept(last)) return last;
      await page.keyboard.press("Escape");
      await palette("Trigger Inline Suggestion");
      const deadline = Date.now() + 20_000;
      do {
        await new Promise((r) => setTimeout(r, 250));
        last = await ghostText(page);
      } while (!last && Date.now() < deadline);
      return last && accept(last) ? last : undefined;
    },
    ms,
    0,
  );
}

/** Sets `ghostline.<key>` in the Settings editor (Ctrl+,): search, then type into its box. */
async function setInSettingsEditor(key: string, value: string): Promise<void> {
  const { page } = h;
  await page.keyboard.press("Control+Comma");
  const search = page.locator(".settings-editor .suggest-input-container textarea, .settings-editor .settings-header input").first();
  await search.waitFor();
  // Under load the first keys can arrive before the search box has the focus, and are lost.
  await until(
    () => "the focus in the settings search box",
    async () =>
      page.evaluate(() => {
        // eslint-disable-next-line @typescript-eslint/no-explicit-any
        const active = (globalThis as any).document.activeElement;
        return Boolean(active?.closest?.(".settings-editor .settings-header"));
      }),
    10_000,
  );
  await page.keyboard.type(`ghostline.${key}`, { delay: 10 });
  const item = page.locator(".settings-editor .setting-item").filter({ hasText: /Max Tokens/ }).first();
  const box = item.locator("input").first();
  await box.waitFor();
  await box.click();
  await page.keyboard.press("Control+A");
  if (value === "") await page.keyboard.press("Backspace");
  else await page.keyboard.type(value, { delay: 50 });
  await h.shot(`settings-${key}-${value || "empty"}`);
  // The settings editor saves as you type (after a short pause); then back to the file.
  await until(
    () => `ghostline.${key} = ${JSON.stringify(value)} in settings.json`,
    async () => {
      const saved = savedSetting(`ghostline.${key}`);
      return value === "" ? saved === undefined || saved === null : saved === Number(value);
    },
    10_000,
  );
  // Escape closes the settings editor (a modal in this VS Code); focus returns to the file.
  await until(
    () => "the settings editor to close",
    async () => {
      if ((await page.locator(".settings-editor").count()) === 0) return true;
      await page.keyboard.press("Escape");
      await new Promise((r) => setTimeout(r, 300));
      return false;
    },
    10_000,
    0,
  );
}

step("a setting changed in VS Code reaches the server: completion.maxTokens = 1 gives a one-token suggestion", async () => {
  requireReady();
  ready = false;
  const { page } = h;
  await typeOnNewLine(/print\(mean\(data\)/, "s = math.");
  const full = await suggestionWhere((g) => g.length > 4, "a suggestion with the default maxTokens");
  note(`default maxTokens: ${JSON.stringify(full)}`);
  await h.shot("maxtokens-default");
  const at = await cursor(page);

  await setInSettingsEditor("completion.maxTokens", "1");
  await until(async () => `the cursor back at ${JSON.stringify(at)}`, async () => JSON.stringify(await cursor(page)) === JSON.stringify(at), 10_000);
  const one = await suggestionWhere((g) => g.length < full.length, "a shorter suggestion once maxTokens is 1");
  note(`maxTokens 1: ${JSON.stringify(one)}`);
  await h.shot("maxtokens-1");
  assert.ok(full.startsWith(one), `one token (${JSON.stringify(one)}) begins the longer suggestion (${JSON.stringify(full)})`);
  // The engine without an editor, on the same text at the same cursor, with one token: the same.
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+S");
  const file = join(h.workspace, FILE);
  const text = await until(() => `${FILE} saved with "s = math."`, async () => readFileSync(file, "utf8").includes("s = math.") && readFileSync(file, "utf8"), 10_000);
  const cli = await run(h.bin, ["complete", file, "--line", String(at.line), "--character", String(at.character), "--max-tokens", "1", "--json", "--model", h.model], {
    timeout: SUGGESTION_MS,
  });
  const oneToken = JSON.parse(cli.stdout) as { text: string; generated_tokens: number };
  note(`ghostline complete --max-tokens 1 on ${JSON.stringify(text.split("\n")[at.line])}: ${JSON.stringify(oneToken)}`);
  assert.equal(oneToken.generated_tokens, 1, "the CLI generated one token");
  assert.equal(one, oneToken.text, "VS Code shows the one-token suggestion the engine makes with maxTokens 1");
  // And back: the longer suggestion returns.
  await setInSettingsEditor("completion.maxTokens", "");
  const again = await suggestionWhere((g) => g === full, "the default-length suggestion again");
  assert.equal(again, full);
  await page.keyboard.press("Escape");
  ready = true;
});

step("clicking the status-bar item toggles completions off (no ghost text) and on again", async () => {
  requireReady();
  ready = false;
  const { page } = h;
  const item = statusItem(page);
  // The control: at this spot, with completions on, Trigger Inline Suggestion shows ghost text
  // within OFF_WAIT_MS; so that, off, the same wait at the same spot shows that none comes.
  await typeOnNewLine(/data\s=\s\[2,\s4/, "t = math.");
  const at = await cursor(page);
  /** Hides any ghost text, asks for a suggestion, and returns the ghost text after up to `OFF_WAIT_MS`. */
  const triggered = async (): Promise<string> => {
    await page.keyboard.press("Escape");
    await until(() => "the ghost text to go", async () => (await ghostText(page)) === "", 10_000);
    await palette("Trigger Inline Suggestion");
    const deadline = Date.now() + OFF_WAIT_MS;
    let ghost = "";
    while (!ghost && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      ghost = await ghostText(page);
    }
    return ghost;
  };
  const on = await triggered();
  note(`completions on, at ${JSON.stringify(at)}: ${JSON.stringify(on)}`);
  assert.notEqual(on, "", `ghost text within ${OFF_WAIT_MS} ms while completions are on`);
  await page.keyboard.press("Escape");
  await item.click();
  await until(
    async () => `"(off)" on the status bar, got ${JSON.stringify(await item.innerText())}`,
    async () => (await item.innerText()).includes("(off)"),
    10_000,
  );
  await until(
    () => "ghostline.completion.enabled = false in settings.json",
    async () => savedSetting("ghostline.completion.enabled") === false,
    10_000,
  );
  // Off: the same request at the same spot brings no ghost text in the same time.
  assert.deepEqual(await cursor(page), at, "the cursor where the control had ghost text");
  assert.equal(await triggered(), "", "no ghost text while completions are off");
  await h.shot("completions-off");
  await item.click();
  await until(
    async () => `the status bar without "(off)", got ${JSON.stringify(await item.innerText())}`,
    async () => !(await item.innerText()).includes("(off)"),
    10_000,
  );
  const back = await suggestionWhere((g) => g.length > 0, "ghost text once completions are on again");
  note(`completions on again: ${JSON.stringify(back)}`);
  await h.shot("completions-on");
  await page.keyboard.press("Escape");
  ready = true;
});

// Code actions (issue 5): Quick Fix lists ghostline's actions for the function under the cursor.
step("a ghostline code action is listed by Ctrl+. and applies: a docstring for main()", async () => {
  requireReady();
  ready = false;
  const { page } = h;
  const editor = page.locator(".editor-instance .monaco-editor").first();
  // The cursor on `main` in `def main():`, then Quick Fix (Ctrl+.), as a person does.
  await editor.locator(".view-line").filter({ hasText: /def\smain\(\):/ }).first().locator("span span").filter({ hasText: /^main$/ }).first().click();
  await page.keyboard.press("Control+Period");
  const menu = page.locator(".action-widget").filter({ has: page.locator(".monaco-list-row") }).first();
  await menu.waitFor({ timeout: 60_000 });
  const docstring = menu.locator(".monaco-list-row").filter({ hasText: /Add docstring to `?main`?/ }).first();
  await docstring.waitFor({ timeout: 60_000 });
  const titles = (await menu.locator(".monaco-list-row").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim());
  note(`code actions: ${JSON.stringify(titles)}`);
  assert.ok(titles.some((t) => /Generate tests for `?main`?/.test(t)), `"Generate tests for main" is listed too: ${JSON.stringify(titles)}`);
  await h.shot("code-actions");
  await docstring.click();
  // The server generates the docstring with the local model, then applies the edit.
  const line = await until(
    () => "a docstring line under def main():",
    async () => {
      const lines = await editor.locator(".view-line").allInnerTexts();
      const i = lines.findIndex((l) => /def\smain\(\):/.test(l));
      return i >= 0 && /^\s+(""")/.test(lines[i + 1]?.replace(/\u00a0/g, " ") ?? "") && lines[i + 1];
    },
    SUGGESTION_MS,
  );
  note(`docstring: ${JSON.stringify(line.replace(/\u00a0/g, " "))}`);
  await h.shot("code-action-applied");
  await page.keyboard.press("Control+S");
  await until(
    () => `${FILE} saved with the docstring`,
    async () => /def main\(\):\n    """/.test(readFileSync(join(h.workspace, FILE), "utf8")),
    10_000,
  );
  // The extension's command tells where the action ran and why.
  await palette("ghostline: Why Was the Last Action Routed There?");
  const toast = page.locator(".notifications-toasts .notification-toast").filter({ hasText: /local/i }).first();
  await toast.waitFor({ timeout: 10_000 });
  note(`route: ${JSON.stringify((await toast.innerText()).replace(/\s+/g, " "))}`);
  await h.shot("last-route");
  ready = true;
});

// The cross-file section with a real client's watcher (fixtures/editors/two-files): plan.py
// imports and calls rectangle_area from its sibling geometry.py. Both are written into the open
// folder now (VS Code's watcher tells the server they were created); plan.py is opened and typed
// into; the section offered to its prompt holds geometry.py; then geometry.py changes on disk
// (not open in VS Code: only the watcher's event can tell the server), and the section grows by
// exactly the parameter added to the signature.
step("a two-file workspace: the sibling's definition reaches the prompt, and its change on disk follows through VS Code's watcher", async () => {
  requireReady();
  const { page } = h;
  const fixture = join(repoRoot, "fixtures", "editors", "two-files");
  for (const name of ["geometry.py", "plan.py"]) writeFileSync(join(h.workspace, name), readFileSync(join(fixture, name), "utf8"));
  await page.keyboard.press("Control+P");
  await page.keyboard.type("plan.py", { delay: KEY_DELAY });
  await page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: "plan.py" }).first().waitFor();
  await page.keyboard.press("Enter");
  await page.locator(".tab").filter({ hasText: "plan.py" }).waitFor();
  await typeOnNewLine(/total\s\+=\srectangle_area/, "total = round(");
  const at = await cursor(page);
  /** Asks for a suggestion at the cursor, then what the server offered its prompt. */
  const section = async () => {
    await page.keyboard.press("Escape");
    await triggerAnswered();
    const t = await lastTimings();
    return t.uri?.endsWith("/plan.py") && t.position?.line === at.line ? t : undefined;
  };
  const first = await until(() => "geometry.py in plan.py's cross-file section", async () => {
    const t = await section();
    return t?.cross_file_paths.includes("geometry.py") && t;
  }, SUGGESTION_MS, 500);
  note(`cross-file section: ${JSON.stringify(first.cross_file_paths)}, ${first.cross_file_bytes} bytes`);
  assert.equal(first.cross_file_paths[first.cross_file_paths.length - 1], "plan.py", "the section ends with the file itself");
  await h.shot("cross-file");
  const file = join(h.workspace, "geometry.py");
  const added = ", scale: float = 1.0";
  const text = readFileSync(file, "utf8");
  writeFileSync(file, text.replace("height: float) -> float", `height: float${added}) -> float`));
  const changed = await until(() => `the section ${added.length} bytes longer after geometry.py changed on disk`, async () => {
    const t = await section();
    return t && t.cross_file_bytes !== first.cross_file_bytes && t;
  }, 60_000, 500);
  note(`after the change on disk: ${changed.cross_file_bytes} bytes`);
  assert.equal(changed.cross_file_bytes, first.cross_file_bytes + added.length, "the section changed by exactly the added parameter");
  assert.deepEqual(changed.cross_file_paths, first.cross_file_paths);
  await page.keyboard.press("Escape");
});

/** Opens the workspace file `name` through Quick Open (Ctrl+P) and selects, with the keyboard,
 * `length` characters from column `from` of the first line matching `line`; returns the editor. */
async function openAndSelect(name: string, line: RegExp, from: number, length: number) {
  const { page } = h;
  await page.keyboard.press("Control+P");
  await page.keyboard.type(name, { delay: KEY_DELAY });
  await page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: name }).first().waitFor();
  await page.keyboard.press("Enter");
  await page.locator(".tab").filter({ hasText: name }).waitFor();
  const editor = page.locator(".editor-instance .monaco-editor").first();
  await editor.locator(".view-line").filter({ hasText: line }).first().click();
  await page.keyboard.press("Home");
  for (let i = 0; i < from; i++) await page.keyboard.press("ArrowRight");
  for (let i = 0; i < length; i++) await page.keyboard.press("Shift+ArrowRight");
  return editor;
}

/** The next edits shown in the active editor: each decoration's `→ …` text after the text it
 * follows, with the line it is on (top to bottom). VS Code draws a decoration's `after` text as
 * the `::after` content of a span in the line. */
async function nextEditsShown(): Promise<{ line: string; before: string; after: string }[]> {
  return h.page.evaluate(() => {
    // Runs in the page (no DOM types in this project's tsconfig).
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const g = globalThis as any;
    const editor = g.document.querySelector(".editor-instance .monaco-editor.focused") ?? g.document.querySelector(".editor-instance .monaco-editor");
    if (!editor) return [];
    const found: { top: number; line: string; before: string; after: string }[] = [];
    for (const line of editor.querySelectorAll(".view-lines .view-line")) {
      let before = "";
      for (const span of line.querySelectorAll("span")) {
        if (span.children.length === 0) before += span.textContent ?? "";
        const content = g.getComputedStyle(span, "::after").content as string;
        if (content && content.includes("→")) {
          const text = (line.textContent ?? "").replace(/\u00a0/g, " ");
          found.push({ top: parseFloat(line.style.top || "0"), line: text, before: before.replace(/\u00a0/g, " "), after: content.replace(/^"|"$/g, "") });
        }
      }
    }
    return found.sort((a, b) => a.top - b.top).map(({ line, before, after }) => ({ line, before, after }));
  });
}

// Next edits (issue 31): a parameter renamed by typing; once the edit settles the extension asks
// ghostline/nextEdit and decorates the other uses with the new name; Alt+N jumps to the first
// and, pressed there, accepts: the saved file has every use renamed. A rename is made from the
// syntax tree, so what is shown does not depend on the model.
step("next edits: a renamed parameter's other uses are shown; Alt+N jumps, then accepts; typing elsewhere clears them", async () => {
  // Needs only the server up (the status bar's step), not what the steps since left behind.
  const { page } = h;
  for (let i = 0; i < 3; i++) await page.keyboard.press("Escape");
  const SHAPES = "def area(w, h):\n    s = w * h\n    return s + w\n\n\nx = area(3, 4)\n";
  writeFileSync(join(h.workspace, "shapes.py"), SHAPES);
  // `w` in `def area(w, h):` selected with the keyboard, and typed over.
  const editor = await openAndSelect("shapes.py", /def\sarea\(w,/, 9, 1);
  await page.keyboard.type("width", { delay: KEY_DELAY });
  await page.keyboard.press("Escape");
  const shown = await until(
    async () => `two next edits decorated, got ${JSON.stringify(await nextEditsShown())}`,
    async () => {
      const s = await nextEditsShown();
      return s.length === 2 && s;
    },
    60_000,
  );
  note(`next edits shown: ${JSON.stringify(shown)}`);
  await h.shot("next-edit-shown");
  assert.deepEqual(
    shown.map((s) => [s.line.trim(), s.before.trim(), s.after]),
    [
      ["s = w * h", "s = w", "→ width"],
      ["return s + w", "return s + w", "→ width"],
    ],
    "the rename after each other use of `w`",
  );
  // Alt+N: the cursor to the first; again, there: accepted.
  await page.keyboard.press("Alt+N");
  await until(async () => `the cursor at 1:8, the status bar says ${JSON.stringify(await cursor(page))}`, async () => JSON.stringify(await cursor(page)) === JSON.stringify({ line: 1, character: 8 }), 10_000);
  await h.shot("next-edit-jumped");
  assert.equal((await nextEditsShown()).length, 2, "still shown after the jump");
  await page.keyboard.press("Alt+N");
  await until(
    async () => `the uses renamed, the editor shows ${JSON.stringify(await editor.locator(".view-line").allInnerTexts())}`,
    async () => (await editor.locator(".view-line").filter({ hasText: /return\ss\s\+\swidth/ }).count()) > 0,
    10_000,
  );
  await h.shot("next-edit-accepted");
  assert.deepEqual(await nextEditsShown(), [], "nothing shown once accepted");
  await page.keyboard.press("Control+S");
  const file = join(h.workspace, "shapes.py");
  const saved = await until(() => "shapes.py saved with the rename", async () => readFileSync(file, "utf8").includes("return s + width") && readFileSync(file, "utf8"), 10_000);
  assert.equal(saved, "def area(width, h):\n    s = width * h\n    return s + width\n\n\nx = area(3, 4)\n", "exactly the rename, everywhere");

  // Another rename (`h` → `height`), shown; typing at the end of the file clears it at once.
  await new Promise((r) => setTimeout(r, 1200)); // a new edit, not the accepted one
  await editor.locator(".view-line").filter({ hasText: /def\sarea\(width,/ }).first().click();
  await page.keyboard.press("Home");
  for (let i = 0; i < 16; i++) await page.keyboard.press("ArrowRight");
  await page.keyboard.press("Shift+ArrowRight");
  await page.keyboard.type("height", { delay: KEY_DELAY });
  await until(async () => `one next edit for height, got ${JSON.stringify(await nextEditsShown())}`, async () => (await nextEditsShown()).length === 1, 60_000);
  await page.keyboard.press("Escape");
  assert.equal((await nextEditsShown()).length, 1, "still shown: Escape is not an edit");
  await page.keyboard.press("Control+End");
  await page.keyboard.type("#", { delay: KEY_DELAY });
  await until(async () => `no next edit after typing elsewhere, got ${JSON.stringify(await nextEditsShown())}`, async () => (await nextEditsShown()).length === 0, 2_000);
  await h.shot("next-edit-cleared");
});

// Next edits across files: a module function renamed at its definition, where another file of
// the workspace (never opened; VS Code's watcher tells the server it was created) imports and
// calls it. The decoration at the call in the file counts the other file's edits; accepting
// applies all of them as one workspace edit, and Save All writes both files.
step("next edits across files: a renamed module function's importer is edited with it, and Save All writes both", async () => {
  const { page } = h;
  for (let i = 0; i < 3; i++) await page.keyboard.press("Escape");
  const SOLIDS = "def volume(a, b):\n    return a * b\n\n\nv = volume(2, 3)\n";
  const BOXES = "from solids import volume\n\nw = volume(1, 2)\n";
  writeFileSync(join(h.workspace, "boxes.py"), BOXES);
  writeFileSync(join(h.workspace, "solids.py"), SOLIDS);
  // `volume` in `def volume(a, b):` selected with the keyboard, and typed over.
  const editor = await openAndSelect("solids.py", /def\svolume\(a,/, 4, 6);
  await page.keyboard.type("capacity", { delay: KEY_DELAY });
  await page.keyboard.press("Escape");
  // Until the index has boxes.py (the watcher's event), the proposal counts no other file.
  const shown = await until(
    async () => `the call decorated with boxes.py's two edits counted, got ${JSON.stringify(await nextEditsShown())}`,
    async () => {
      const s = await nextEditsShown();
      return s.length === 1 && s[0].after.includes("other file") && s;
    },
    60_000,
  );
  note(`next edits shown: ${JSON.stringify(shown)}`);
  await h.shot("next-edit-across-shown");
  assert.deepEqual(
    shown.map((s) => [s.line.trim(), s.before.trim(), s.after]),
    [["v = volume(2, 3)", "v = volume", "→ capacity (+2 in 1 other file)"]],
    "the call in the file, and the count of the other file's edits",
  );
  await page.keyboard.press("Alt+N");
  await until(async () => `the cursor at 4:4, the status bar says ${JSON.stringify(await cursor(page))}`, async () => JSON.stringify(await cursor(page)) === JSON.stringify({ line: 4, character: 4 }), 10_000);
  await page.keyboard.press("Alt+N");
  await until(
    async () => `the call renamed, the editor shows ${JSON.stringify(await editor.locator(".view-line").allInnerTexts())}`,
    async () => (await editor.locator(".view-line").filter({ hasText: /v\s=\scapacity\(2,\s3\)/ }).count()) > 0,
    10_000,
  );
  await h.shot("next-edit-across-accepted");
  assert.equal(readFileSync(join(h.workspace, "boxes.py"), "utf8"), BOXES, "boxes.py is edited in VS Code, not yet on disk");
  await page.keyboard.press("F1");
  await page.keyboard.type("File: Save All", { delay: 20 });
  await page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: "File: Save All" }).first().waitFor();
  await page.keyboard.press("Enter");
  const files = () => ["solids.py", "boxes.py"].map((f) => readFileSync(join(h.workspace, f), "utf8"));
  const want = [SOLIDS, BOXES].map((t) => t.replaceAll("volume", "capacity"));
  await until(async () => `both files saved renamed, got ${JSON.stringify(files())}`, async () => JSON.stringify(files()) === JSON.stringify(want), 10_000);
});
