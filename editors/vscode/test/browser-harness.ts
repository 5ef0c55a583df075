// The real-VS-Code harness: code-server (VS Code in the browser) with the packaged .vsix
// installed, driven in headless Chromium by playwright-core. Used by *.browser.ts.
//
// Environment (scripts/test-editors.sh sets all of them):
//   GHOSTLINE_BIN          the ghostline binary (ghostline.server.path)
//   GHOSTLINE_MODEL        the test model (ghostline.model.path)
//   GHOSTLINE_CODE_SERVER  the code-server launcher (scripts/code-server.sh prints it)
//   GHOSTLINE_VSIX         the freshly packaged extension (default: ghostline.vsix here)
//   GHOSTLINE_CHROMIUM     the browser (default: /usr/bin/chromium, Debian's package)
//   GHOSTLINE_UI_ARTIFACTS screenshots and logs (default: <repo>/target/ui-artifacts/vscode)
// A test may install another .vsix, change the base settings, add to code-server's environment
// (and so the server's) and keep its screenshots in a folder of its own (StartOptions).
import assert from "node:assert/strict";
import { ChildProcess, execFile, spawn } from "node:child_process";
import { closeSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import type { BrowserContext, Locator, Page } from "playwright-core";
import { chromium } from "playwright-core";

const run = promisify(execFile);

/** editors/vscode (the bundle sits in out/browser). */
export const extensionRoot = resolve(__dirname, "..", "..");
export const repoRoot = resolve(extensionRoot, "..", "..");

function required(name: string): string {
  const value = process.env[name] ?? "";
  assert.ok(value && existsSync(value), `${name} must name an existing file (got ${JSON.stringify(value)})`);
  return value;
}

export interface Harness {
  page: Page;
  context: BrowserContext;
  /** The workspace folder code-server opened. */
  workspace: string;
  /** The user settings file (settings.json in the user-data-dir). */
  settingsFile: string;
  /** The text of the ghostline output channel as VS Code logged it (empty until it exists). */
  outputLog(): string;
  artifacts: string;
  bin: string;
  model: string;
  /** The acceptance statistics' database (`ghostline.stats.path`; retention checked 1 s and 2 s after an accept). */
  statsDb: string;
  /** Saves a screenshot as <artifacts>/<NN>-<name>.png and returns its path. */
  shot(name: string): Promise<string>;
  /** Rewrites the user settings (the base settings plus `extra`; a key set to undefined is removed). */
  writeSettings(extra: Record<string, unknown>): void;
  close(): Promise<void>;
}

/** `step(name, fn)`: a test that leaves a screenshot of the screen when it fails. */
export function stepsOf(harness: () => Harness | undefined): (name: string, fn: () => Promise<void>) => void {
  return (name, fn) =>
    test(name, async () => {
      try {
        await fn();
      } catch (error) {
        await harness()?.shot("FAILED").catch(() => undefined);
        throw error;
      }
    });
}

/** Elapsed-time log lines, so a slow step shows where the minutes went. */
const t0 = Date.now();
export function note(message: string): void {
  console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${message}`);
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

async function waitForHttp(url: string, child: ChildProcess, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`code-server exited with ${child.exitCode} before serving ${url}`);
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`code-server did not answer ${url} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export interface StartOptions {
  /** The .vsix to install (default: GHOSTLINE_VSIX, else ghostline.vsix here). */
  vsix?: string;
  /** Laid over the base user settings; a key set to undefined is removed. */
  settings?: Record<string, unknown>;
  /** Added to code-server's environment, which the extension host and the server inherit. */
  env?: Record<string, string>;
  /** Screenshots and logs go to the artifacts folder with this suffix (`vscode-first-run`). */
  artifactsSuffix?: string;
}

export async function startVsCode(files: Record<string, string>, options: StartOptions = {}): Promise<Harness> {
  const bin = required("GHOSTLINE_BIN");
  const model = required("GHOSTLINE_MODEL");
  const codeServer = required("GHOSTLINE_CODE_SERVER");
  const vsix = options.vsix || process.env.GHOSTLINE_VSIX || join(extensionRoot, "ghostline.vsix");
  assert.ok(existsSync(vsix), `the packaged extension is missing: ${vsix} (npm run package)`);
  const chromiumPath = process.env.GHOSTLINE_CHROMIUM || "/usr/bin/chromium";
  assert.ok(existsSync(chromiumPath), `Chromium is missing: ${chromiumPath} (apt-get install chromium)`);
  const artifacts = (process.env.GHOSTLINE_UI_ARTIFACTS || join(repoRoot, "target", "ui-artifacts", "vscode")) + (options.artifactsSuffix ?? "");
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });

  const root = mkdtempSync(join(tmpdir(), "ghostline-vscode-"));
  const workspace = join(root, "project");
  const userData = join(root, "user-data");
  const extensionsDir = join(root, "extensions");
  mkdirSync(workspace);
  mkdirSync(join(userData, "User"), { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(workspace, name), text);

  const common = ["--user-data-dir", userData, "--extensions-dir", extensionsDir, "--config", join(root, "config.yaml")];
  // The packaged .vsix, installed the way a user installs one.
  const installed = await run(codeServer, [...common, "--install-extension", vsix], { timeout: 120_000 });
  note(`installed ${vsix}: ${installed.stdout.trim().split("\n").pop()}`);
  const listed = await run(codeServer, [...common, "--list-extensions", "--show-versions"], { timeout: 60_000 });
  assert.match(listed.stdout, /^ghostline\.ghostline@/m, `ghostline is not among the installed extensions:\n${listed.stdout}`);

  const settingsFile = join(userData, "User", "settings.json");
  const statsDb = join(root, "stats.sqlite");
  const base: Record<string, unknown> = {
    "ghostline.server.path": bin,
    "ghostline.model.path": model,
    "ghostline.stats.path": statsDb,
    "ghostline.stats.retentionSeconds": [1, 2],
    // A quiet, reproducible workbench: no welcome page, tips, update or telemetry traffic.
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "extensions.ignoreRecommendations": true,
    "chat.commandCenter.enabled": false,
    "security.workspace.trust.startupPrompt": "always",
    "files.autoSave": "off",
    "editor.minimap.enabled": false,
    // The chat view would take a third of the window in every screenshot.
    "workbench.secondarySideBar.defaultVisibility": "hidden",
  };
  const writeSettings = (extra: Record<string, unknown>) => {
    const merged: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries({ ...options.settings, ...extra })) {
      if (v === undefined) delete merged[k];
      else merged[k] = v;
    }
    writeFileSync(settingsFile, JSON.stringify(merged, null, 2));
  };
  writeSettings({});

  const port = await freePort();
  const logFd = openSync(join(artifacts, "code-server.log"), "w");
  const server = spawn(
    codeServer,
    [
      ...common,
      "--auth", "none",
      "--bind-addr", `127.0.0.1:${port}`,
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-getting-started-override",
      // Debug: the extension's output channel then keeps the server's DEBUG lines, which the
      // suite reads (the requests VS Code makes on its own, such as code actions at the cursor).
      "--log", "debug",
      workspace,
    ],
    {
      stdio: ["ignore", logFd, logFd],
      // Its own process group: close() ends code-server, its extension host and ghostline.
      detached: true,
      // No extension gallery: nothing leaves the machine (the test installs the .vsix itself).
      env: { ...process.env, GHOSTLINE_LOG: "ghostline=debug", EXTENSIONS_GALLERY: "{}", ...options.env },
    },
  );
  closeSync(logFd);
  const base_url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${base_url}/healthz`, server, 90_000);
  note(`code-server on ${base_url}`);

  const context = await chromium.launchPersistentContext(join(root, "chromium"), {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const console_log: string[] = [];
  page.on("console", (m) => console_log.push(`[${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => console_log.push(`[pageerror] ${e.message}`));

  let shots = 0;
  const harness: Harness = {
    page,
    context,
    workspace,
    settingsFile,
    statsDb,
    outputLog() {
      // <user-data-dir>/logs/<session>/exthost1/ghostline.ghostline/ghostline.log
      const logs = join(userData, "logs");
      if (!existsSync(logs)) return "";
      for (const session of readdirSync(logs).sort().reverse()) {
        for (const host of existsSync(join(logs, session)) ? readdirSync(join(logs, session)) : []) {
          const file = join(logs, session, host, "ghostline.ghostline", "ghostline.log");
          if (host.startsWith("exthost") && existsSync(file)) return readFileSync(file, "utf8");
        }
      }
      return "";
    },
    artifacts,
    bin,
    model,
    async shot(name) {
      shots += 1;
      const file = join(artifacts, `${String(shots).padStart(2, "0")}-${name}.png`);
      await page.screenshot({ path: file });
      note(`screenshot ${file}`);
      return file;
    },
    writeSettings,
    async close() {
      writeFileSync(join(artifacts, "browser-console.log"), console_log.join("\n") + "\n");
      await context.close().catch(() => undefined);
      if (server.exitCode === null && server.pid) {
        // code-server and its extension host (which runs ghostline) are one process group.
        try {
          process.kill(-server.pid, "SIGTERM");
        } catch {
          // already gone
        }
        await new Promise((r) => setTimeout(r, 1000));
        try {
          process.kill(-server.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      // VS Code's logs, the ghostline output channel among them (exthost*/ghostline.ghostline/).
      if (existsSync(join(userData, "logs"))) cpSync(join(userData, "logs"), join(artifacts, "vscode-logs"), { recursive: true });
      rmSync(root, { recursive: true, force: true });
    },
  };
  await page.goto(`${base_url}/?folder=${encodeURIComponent(workspace)}`);
  await page.locator(".monaco-workbench").waitFor({ timeout: 90_000 });
  return harness;
}

/** The ghost text shown in the active editor: the inline part and any extra lines. */
export async function ghostText(page: Page): Promise<string> {
  return page.evaluate(() => {
    // Runs in the page (no DOM types in this project's tsconfig).
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const document = (globalThis as any).document as { querySelector(s: string): any };
    const editor = document.querySelector(".editor-instance .monaco-editor.focused") ?? document.querySelector(".editor-instance .monaco-editor");
    if (!editor) return "";
    const texts = (selector: string): string[] => [...editor.querySelectorAll(selector)].map((e: { textContent: string | null }) => e.textContent ?? "");
    const inline = texts(".ghost-text-decoration, .ghost-text-decoration-preview");
    const lines = texts(".ghost-text .view-line");
    return [inline.join(""), ...lines].filter((s) => s !== "").join("\n").replace(/\u00a0/g, " ");
  });
}

/** Polls `check` until it returns a value, or fails with `what()`. */
export async function until<T>(what: () => string | Promise<string>, check: () => Promise<T | undefined | false | "">, ms: number, every = 200): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${await what()}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** The ghostline status-bar item. */
export function statusItem(page: Page): Locator {
  return page.locator('.statusbar-item[id="ghostline.ghostline.status"], .statusbar-item[id$="ghostline.status"]').first();
}

/** "Ln 18, Col 17" from the status bar → zero-based line and character. */
export async function cursor(page: Page): Promise<{ line: number; character: number }> {
  const text = (await page.locator('[id="status.editor.selection"]').first().innerText()).trim();
  const match = /Ln (\d+), Col (\d+)/.exec(text);
  assert.ok(match, `no cursor position in the status bar: ${JSON.stringify(text)}`);
  return { line: Number(match[1]) - 1, character: Number(match[2]) - 1 };
}

export function readFile(path: string): string {
  return readFileSync(path, "utf8");
}
