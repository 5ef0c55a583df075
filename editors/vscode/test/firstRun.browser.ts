// The first run in a real VS Code, "from nothing to ghost text without editing any setting":
// the platform .vsix (the server inside; no ghostline.server.path, no model.path), an empty
// Hugging Face cache and no model anywhere the server looks, and the loopback Hub of
// scripts/fake-hub.py serving the test model under the Qwen coder name the server offers (slowed
// to ~25 MB/s so the progress is on screen for a few seconds). A person's first minutes: trust
// the folder, the notification asks, click Download, a progress toast, the status bar says
// ready, type, ghost text. Screenshots in target/ui-artifacts/vscode-first-run/.
import assert from "node:assert/strict";
import { ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";

import { Harness, ghostText, note, repoRoot, startVsCode, statusItem, stepsOf, until } from "./browser-harness";

const FILE = "stats.py";
const source = readFileSync(join(repoRoot, "fixtures", "vscode", FILE), "utf8");
const TYPED = "return math.";
const KEY_DELAY = 60;

let h: Harness;
let hub: ChildProcess;
let home: string;
let ready = false;

const step = stepsOf(() => h);

function requireReady() {
  assert.ok(ready, "an earlier step failed: the editor is not in the state this step needs");
}

before(async () => {
  const vsix = process.env.GHOSTLINE_PLATFORM_VSIX ?? "";
  assert.ok(vsix, "GHOSTLINE_PLATFORM_VSIX must name the platform .vsix (scripts/package-vsix.sh)");
  home = mkdtempSync(join(tmpdir(), "ghostline-first-run-"));
  hub = spawn("python3", [join(repoRoot, "scripts", "fake-hub.py"), process.env.GHOSTLINE_MODEL ?? "", "25000000"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const endpoint = await new Promise<string>((resolve, reject) => {
    hub.once("exit", (code) => reject(new Error(`fake-hub.py exited with ${code}`)));
    hub.stdout!.once("data", (d: Buffer) => resolve(d.toString().split("\n")[0].trim()));
  });
  note(`loopback Hub on ${endpoint}`);
  h = await startVsCode(
    { [FILE]: source },
    {
      vsix,
      artifactsSuffix: "-first-run",
      // Nothing configured: the bundled server, no model.
      settings: { "ghostline.server.path": undefined, "ghostline.model.path": undefined },
      env: {
        HF_ENDPOINT: endpoint,
        HF_HOME: join(home, "hf"),
        HF_HUB_CACHE: "",
        HF_TOKEN: "",
        HF_HUB_OFFLINE: "",
        GHOSTLINE_MODEL: "",
        XDG_CACHE_HOME: join(home, "cache"),
        LLAMA_CACHE: join(home, "llama.cpp"),
        OLLAMA_MODELS: join(home, "ollama"),
        GHOSTLINE_LMSTUDIO_MODELS: join(home, "lmstudio"),
      },
    },
  );
});

after(async () => {
  await h?.close();
  hub?.kill();
  if (home) rmSync(home, { recursive: true, force: true });
});

step("trusted, the bundled server starts with no model and asks to download one", async () => {
  const { page } = h;
  const trust = page.getByRole("button", { name: /Yes, I trust the authors/ });
  await trust.waitFor({ timeout: 60_000 });
  await trust.click();
  const toast = page.locator(".notification-toast").filter({ hasText: "no model configured" }).first();
  await toast.waitFor({ timeout: 90_000 });
  await h.shot("first-run-question");
  const download = toast.getByRole("button", { name: /^Download qwen2\.5-coder-[\d.]+b \(\d+ MB\)$/ });
  assert.equal(await download.count(), 1, `the Download button: ${await toast.innerText()}`);
  assert.equal(await toast.getByRole("button", { name: "Choose a file…" }).count(), 1);
  assert.equal(await toast.getByRole("button", { name: "Not now" }).count(), 1);
  const log = await until(() => "the output to name the server", async () => (/from bundled: /.test(h.outputLog()) ? h.outputLog() : ""), 30_000);
  assert.match(log, /ghostline \S+ from bundled: \S+\/bin\/ghostline/, "the server bundled in the .vsix runs");
  await download.click();
  ready = true;
});

step("a progress toast while it downloads, then the status bar says ready", async () => {
  requireReady();
  ready = false;
  const { page } = h;
  const progress = page.locator(".notification-toast").filter({ hasText: "downloading qwen2.5-coder-" }).first();
  await progress.waitFor({ timeout: 60_000 });
  await until(async () => `MB/s in the toast: ${await progress.innerText().catch(() => "")}`, async () => /MB\/s/.test(await progress.innerText().catch(() => "")), 30_000, 100);
  await h.shot("download-progress");
  const item = statusItem(page);
  await until(
    async () => `the ready icon; the item shows ${JSON.stringify(await item.innerText().catch(() => "?"))}`,
    async () => {
      if ((await item.locator(".codicon-error, .codicon-debug-stop").count()) > 0) {
        throw new Error(`the status bar shows an error: ${await item.getAttribute("aria-label")}`);
      }
      return (await item.locator(".codicon-sparkle").count()) > 0;
    },
    180_000,
  );
  await h.shot("ready-after-download");
  assert.match(h.outputLog(), /found in Hugging Face cache/, "the server found the download where discovery looks");
  ready = true;
});

step("typing shows ghost text, and no setting was edited", async () => {
  requireReady();
  const { page } = h;
  await page.locator(".monaco-workbench").click({ position: { x: 700, y: 400 } });
  await page.keyboard.press("Control+P");
  await page.keyboard.type(FILE, { delay: KEY_DELAY });
  await page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: FILE }).first().waitFor();
  await page.keyboard.press("Enter");
  const editor = page.locator(".editor-instance .monaco-editor").first();
  await editor.locator(".view-line").filter({ hasText: "def stdev" }).waitFor();
  const passLine = editor.locator(".view-line").filter({ hasText: /^\s*pass\s*$/ }).first();
  await passLine.locator("span span").filter({ hasText: "pass" }).first().dblclick();
  await page.keyboard.type(TYPED, { delay: KEY_DELAY });
  const ghost = await until(() => "ghost text in the editor", async () => ghostText(page), 120_000);
  note(`ghost text: ${JSON.stringify(ghost)}`);
  await h.shot("ghost-text");
  assert.ok(ghost.length > 0);
  const settings = readFileSync(h.settingsFile, "utf8");
  assert.doesNotMatch(settings, /ghostline\.(model|server)\.path/, "no setting edited");
});
