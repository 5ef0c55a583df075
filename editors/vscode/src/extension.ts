// The VS Code side of ghostline: starts the language server, passes the settings, shows the
// model's state in the status bar, and handles the first run's file dialog and download toast
// (firstRun.ts). Ghost text itself comes from vscode-languageclient's built-in
// `textDocument/inlineCompletion` support (LSP 3.18); next edits are shown and accepted by
// nextEdit.ts.
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as readline from "node:readline";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  LogMessageNotification,
  ServerOptions,
  ShowMessageNotification,
  State,
} from "vscode-languageclient/node";

import { toServerChange, toServerSettings } from "./config";
import { CHOOSE_MODEL_NOTIFICATION, DownloadToasts, Toast, fillCapabilities } from "./firstRun";
import { locateServer } from "./locate";
import { NextEdits } from "./nextEdit";
import { ProgressValue, Status } from "./status";
import { Level, stderrLine } from "./stderr";

const SECTION = "ghostline";
/** A server command that answers the last action's route and reason (issue 5's router). */
const ROUTE_COMMAND = "ghostline.lastRoute";

let client: LanguageClient | undefined;
let status: Status;
let item: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;
let nextEdits: NextEdits;

function settings() {
  const config = vscode.workspace.getConfiguration(SECTION);
  return toServerSettings((key) => config.get(key), process.env, os.homedir());
}

function render() {
  const view = status.view();
  item.text = view.text;
  item.tooltip = view.tooltip;
  item.backgroundColor = view.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  item.show();
}

/** `ghostline.chooseModel`: a file dialog for a GGUF model, written to `ghostline.model.path`. */
async function chooseModel(): Promise<void> {
  const picked = await vscode.window.showOpenDialog({
    canSelectFiles: true,
    canSelectFolders: false,
    canSelectMany: false,
    filters: { "GGUF model": ["gguf"] },
    openLabel: "Use this model",
    title: "ghostline: choose a GGUF model",
  });
  const file = picked?.[0];
  if (!file) return;
  await vscode.workspace.getConfiguration(SECTION).update("model.path", file.fsPath, vscode.ConfigurationTarget.Global);
}

/** A notification progress toast, open until `done`. */
function toast(title: string): Toast {
  let report: (increment: number, message?: string) => void = () => undefined;
  let done: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => (done = resolve));
  void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, (progress) => {
    report = (increment, message) => progress.report({ increment, message });
    return closed;
  });
  return { report: (increment, message) => report(increment, message), done: () => done() };
}

const downloads = new DownloadToasts(toast);

function probe(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, ["--version"], { timeout: 5000 }, (error, stdout) => (error ? reject(error) : resolve(stdout)));
  });
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  status = new Status();
  status.enabled = config.get<boolean>("completion.enabled", true);
  render();

  // A platform .vsix carries the server in bin/; an unpacker that dropped its mode bits must not
  // make the extension fall back to another binary.
  const bundled = path.join(context.extensionPath, "bin", "ghostline");
  if (process.platform !== "win32" && fs.existsSync(bundled)) {
    try {
      fs.chmodSync(bundled, 0o755);
    } catch {
      // Read-only install: the probe below says whether it runs.
    }
  }

  let found;
  try {
    found = await locateServer(
      { configured: config.get<string>("server.path"), extensionDir: context.extensionPath, pathEnv: process.env.PATH },
      probe,
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    status.model = { kind: "error", message };
    render();
    void vscode.window.showErrorMessage(message);
    return;
  }
  output.appendLine(`ghostline ${found.version} from ${found.source}: ${found.path}`);

  // stdio without `transport`: TransportKind.stdio would append `--stdio`, which ghostline's
  // command line does not take.
  const serverOptions: ServerOptions = {
    run: { command: found.path, args: ["lsp"] },
    debug: { command: found.path, args: ["lsp"], options: { env: { ...process.env, GHOSTLINE_LOG: "ghostline=debug" } } },
  };
  const clientOptions: LanguageClientOptions = {
    // Every file and unsaved buffer; the server decides what it can complete.
    documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
    initializationOptions: () => settings(),
    outputChannel: output,
    // stderr carries the server's log: each line at its own level (the client's default logs
    // every stderr line as an error). stdout is the protocol; this handler is never used for it.
    stdioOptions: {
      stdout: (input, channel) => readline.createInterface({ input, crlfDelay: Infinity }).on("line", (line) => channel.info(line)),
      stderr: (input, channel) => {
        let previous: Level = "error";
        readline.createInterface({ input, crlfDelay: Infinity }).on("line", (line) => {
          const { level, text } = stderrLine(line, previous);
          previous = level;
          channel[level](text);
        });
      },
    },
    middleware: {
      // Ghost text is the VS Code experience. The server's completion item (the same suggestion
      // for editors without ghost text) would duplicate it in the suggest widget, and each of
      // its requests would supersede the inline request on the same document.
      provideCompletionItem: () => undefined,
      provideInlineCompletionItems: async (document, position, ctx, token, next) => {
        if (!status.enabled) return undefined;
        const started = performance.now();
        const result = await next(document, position, ctx, token);
        if (!token.isCancellationRequested) {
          status.latency(performance.now() - started);
          render();
        }
        return result;
      },
      handleWorkDoneProgress: (token, params, next) => {
        // The first-run download also gets a toast; the status bar follows every progress.
        downloads.handle(token, params as ProgressValue);
        status.progress(token, params as ProgressValue);
        render();
        next(token, params);
      },
    },
  };
  client = new LanguageClient(SECTION, "ghostline", serverOptions, clientOptions);
  // "Choose a file…" in the server's first-run question: the server asks us to open a dialog.
  client.registerFeature({
    fillClientCapabilities: fillCapabilities,
    initialize() {},
    getState: () => ({ kind: "static" }),
    clear() {},
  });
  client.onNotification(CHOOSE_MODEL_NOTIFICATION, () => void chooseModel());
  // Registered before start so they replace the client's default handlers; messages still go
  // to the output channel and to VS Code's notifications as before.
  client.onNotification(LogMessageNotification.type, (params) => {
    output.appendLine(params.message);
    status.log(params.message);
    render();
  });
  client.onNotification(ShowMessageNotification.type, (params) => {
    output.appendLine(params.message);
    status.showMessage(params.type, params.message);
    render();
    const show = params.type === 1 ? vscode.window.showErrorMessage : params.type === 2 ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    void show(params.message);
  });
  client.onDidChangeState((event) => {
    if (event.newState === State.Stopped) {
      status.model = { kind: "stopped" };
      render();
    }
  });
  try {
    // `ghostline.trace.server` is read by the client itself (with the output's log level).
    await client.start();
  } catch (error) {
    status.model = { kind: "error", message: error instanceof Error ? error.message : String(error) };
    render();
  }
}

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  nextEdits?.clear();
  if (running) await running.stop();
}

async function toggleCompletions(): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const enabled = !config.get<boolean>("completion.enabled", true);
  // Saved where the user's other settings are: a workspace value when there is one.
  const inspect = config.inspect<boolean>("completion.enabled");
  const target = inspect?.workspaceValue !== undefined ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
  await config.update("completion.enabled", enabled, target);
  void vscode.window.setStatusBarMessage(`ghostline: completions ${enabled ? "on" : "off"}`, 2000);
}

async function showLastRoute(): Promise<void> {
  const commands = client?.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
  if (client && commands.includes(ROUTE_COMMAND)) {
    try {
      const answer = await client.sendRequest(ExecuteCommandRequest.type, { command: ROUTE_COMMAND, arguments: [] });
      if (typeof answer === "string" && answer) {
        void vscode.window.showInformationMessage(answer);
        return;
      }
    } catch (error) {
      output.appendLine(`${ROUTE_COMMAND} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  void vscode.window.showInformationMessage(status.routeReport());
}

/**
 * The server's figures for the last completion it answered (`ghostline/lastTimings`), written to
 * the ghostline output as one `ghostline/lastTimings: {…}` line and returned. Its suggestion and
 * cross-file section hold code: only with `ghostline.debug.logCode`; otherwise the section's file
 * paths and its length stand for it. The prompt's token ids are left out.
 */
async function showLastTimings(): Promise<unknown> {
  if (!client) {
    output.appendLine("ghostline/lastTimings: the server is not running");
    return undefined;
  }
  const answer = (await client.sendRequest("ghostline/lastTimings")) as Record<string, unknown> | null;
  if (!answer) {
    output.appendLine("ghostline/lastTimings: no completion answered yet");
    return answer;
  }
  const { prompt: _prompt, text, cross_file: crossFile, ...figures } = answer;
  const section = typeof crossFile === "string" ? crossFile : "";
  const shown: Record<string, unknown> = {
    ...figures,
    // Path headers as the prompt carried them: a comment (`# path: …`, `// path: …`), or the
    // model's file separator (`<file_sep>…`).
    cross_file_paths: [...section.matchAll(/^(?:(?:#|\/\/) path: |<file_sep>)(.*)$/gm)].map((m) => m[1]),
    cross_file_bytes: Buffer.byteLength(section),
  };
  if (vscode.workspace.getConfiguration(SECTION).get<boolean>("debug.logCode", false)) {
    shown.text = text;
    shown.cross_file = section;
  }
  output.appendLine(`ghostline/lastTimings: ${JSON.stringify(shown)}`);
  return answer;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("ghostline", { log: true });
  item = vscode.window.createStatusBarItem("ghostline.status", vscode.StatusBarAlignment.Right, 100);
  item.name = "ghostline";
  item.command = "ghostline.toggleCompletions";
  status = new Status();
  nextEdits = new NextEdits(
    () => (client?.state === State.Running ? client : undefined),
    () => vscode.workspace.getConfiguration(SECTION).get<boolean>("nextEdit.enabled", true),
    (line) => output.appendLine(line),
  );
  context.subscriptions.push(
    output,
    item,
    nextEdits,
    vscode.commands.registerCommand("ghostline.nextEdit", () => nextEdits.jumpOrAccept()),
    vscode.commands.registerCommand("ghostline.acceptNextEdit", () => nextEdits.accept()),
    vscode.commands.registerCommand("ghostline.dismissNextEdit", () => nextEdits.clear()),
    vscode.commands.registerCommand("ghostline.toggleCompletions", toggleCompletions),
    vscode.commands.registerCommand("ghostline.showLastRoute", showLastRoute),
    vscode.commands.registerCommand("ghostline.showOutput", () => output.show()),
    vscode.commands.registerCommand("ghostline.showLastTimings", showLastTimings),
    vscode.commands.registerCommand("ghostline.chooseModel", chooseModel),
    vscode.commands.registerCommand("ghostline.restartServer", async () => {
      await stop();
      await start(context);
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration(SECTION)) return;
      if (event.affectsConfiguration(`${SECTION}.server.path`)) {
        await stop();
        await start(context);
        return;
      }
      status.enabled = vscode.workspace.getConfiguration(SECTION).get<boolean>("completion.enabled", true);
      render();
      // The mapped settings, not VS Code's raw section: editor-only keys stay here.
      if (client?.state === State.Running) {
        // A change: every managed key, cleared ones as null (the server layers changes).
        const config = vscode.workspace.getConfiguration(SECTION);
        const change = toServerChange((key) => config.get(key), process.env, os.homedir());
        await client.sendNotification("workspace/didChangeConfiguration", { settings: change });
      }
    }),
  );
  await start(context);
}

export async function deactivate(): Promise<void> {
  await stop();
}
