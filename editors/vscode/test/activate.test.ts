// Loads the real bundle (dist/extension.js, as packaged) with a stand-in `vscode` module and
// activates it: the commands package.json contributes are the ones registered, and a server
// path that is not ghostline ends in an error on the status bar, not an exception.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Module from "node:module";
import { join } from "node:path";
import { test } from "node:test";

const root = join(__dirname, "..", "..");

function standIn(settings: Record<string, unknown>) {
  const calls = { commands: [] as string[], errors: [] as string[], item: {} as Record<string, unknown> };
  const disposable = { dispose() {} };
  const api: Record<string, unknown> = {
    StatusBarAlignment: { Left: 1, Right: 2 },
    ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
    ThemeColor: class { constructor(public id: string) {} },
    window: {
      createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {}, info() {}, error() {} }),
      createStatusBarItem: () => Object.assign(calls.item, { show() { calls.item.shown = true; }, dispose() {} }),
      showErrorMessage: async (m: string) => { calls.errors.push(m); },
      showWarningMessage: async () => undefined,
      showInformationMessage: async () => undefined,
      setStatusBarMessage: () => disposable,
      createTextEditorDecorationType: () => disposable,
      onDidChangeActiveTextEditor: () => disposable,
    },
    commands: { registerCommand: (id: string) => { calls.commands.push(id); return disposable; } },
    workspace: {
      getConfiguration: () => ({ get: (key: string, fallback?: unknown) => settings[key] ?? fallback, inspect: () => undefined, update: async () => {} }),
      onDidChangeConfiguration: () => disposable,
      onDidChangeTextDocument: () => disposable,
    },
  };
  // vscode-languageclient subclasses these when it loads; bundles copy the module's own keys.
  for (const name of [
    "CallHierarchyItem", "CancellationError", "CodeAction", "CodeLens", "CompletionItem", "Diagnostic",
    "DocumentLink", "InlayHint", "SymbolInformation", "TypeHierarchyItem",
  ]) {
    api[name] = class {};
  }
  return { vscode: api, calls };
}

test("activate: commands match package.json; a wrong server path shows an error", async () => {
  const { vscode, calls } = standIn({ "server.path": "/nonexistent/ghostline" });
  const load = (Module as unknown as { _load: (r: string, ...rest: unknown[]) => unknown })._load;
  (Module as unknown as { _load: unknown })._load = (request: string, ...rest: unknown[]) =>
    request === "vscode" ? vscode : load(request, ...rest);
  try {
    const extension = require(join(root, "dist", "extension.js"));
    assert.equal(typeof extension.activate, "function");
    assert.equal(typeof extension.deactivate, "function");
    await extension.activate({ subscriptions: [], extensionPath: join(root, "no-such-dir") });

    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
    assert.deepEqual([...calls.commands].sort(), contributed);

    assert.equal(calls.errors.length, 1, String(calls.errors));
    assert.match(calls.errors[0], /ghostline\.server\.path = \/nonexistent\/ghostline/);
    assert.equal(calls.item.shown, true);
    assert.match(String(calls.item.text), /error/);
    assert.match(String(calls.item.tooltip), /nonexistent/);
    assert.equal(calls.item.command, "ghostline.toggleCompletions");
    await extension.deactivate();
  } finally {
    (Module as unknown as { _load: unknown })._load = load;
  }
});
