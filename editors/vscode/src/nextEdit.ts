// Next edits in VS Code: once an edit settles, asks the server for `ghostline/nextEdit` and shows
// each proposed edit as a decoration at its target (the replaced text marked, `→ new text`
// after it); the command "ghostline: Jump to / Accept Next Edit" (Alt+N) moves the cursor to
// the first edit and, pressed there, applies every edit of the proposal — with the edits it
// carries for other files (a renamed definition's uses where it is imported), as one workspace
// edit. Any change to the document clears what is shown; so does another editor.
import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";

export const NEXT_EDIT_REQUEST = "ghostline/nextEdit";
/** The context key the key bindings' `when` reads: a next edit is shown in the active editor. */
export const SHOWN_CONTEXT = "ghostline.nextEditShown";
/** No change for this long: the edit has settled, ask. */
const SETTLE_MS = 300;

interface WireEdit {
  /** `version` null: a file not open, as it is on disk. */
  textDocument: { uri: string; version: number | null };
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  newText: string;
  /** Run on the server once the proposal is applied (statistics, edit history). */
  command?: { title: string; command: string; arguments?: unknown[] };
}

/** What the decoration after an edit says: its new text's first line (`…` when there is more). */
export function label(newText: string): string {
  if (newText === "") return "→ (delete)";
  const [first, ...rest] = newText.split("\n");
  return `→ ${first}${rest.length > 0 ? " …" : ""}`;
}

interface Shown {
  editor: vscode.TextEditor;
  version: number;
  edits: { range: vscode.Range; newText: string }[];
  /** The proposal's edits of other files, applied with it. */
  others: { uri: vscode.Uri; version: number | null; range: vscode.Range; newText: string }[];
  /** The server's command for the proposal, run once it is applied. */
  command?: WireEdit["command"];
}

/** What the first edit's decoration adds when the proposal goes on in other files. */
export function elsewhere(edits: number, files: number): string {
  if (edits === 0) return "";
  return ` (+${edits} in ${files} other file${files === 1 ? "" : "s"})`;
}

export class NextEdits implements vscode.Disposable {
  private readonly after = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor("editorGhostText.foreground"), margin: "0 0 0 0.3em" },
  });
  private readonly replaced = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
  });
  private shown: Shown | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private asking: vscode.CancellationTokenSource | undefined;
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly enabled: () => boolean,
    private readonly log: (line: string) => void,
  ) {
    this.subscriptions = [
      this.after,
      this.replaced,
      vscode.workspace.onDidChangeTextDocument((event) => this.changed(event)),
      vscode.window.onDidChangeActiveTextEditor(() => this.clear()),
    ];
  }

  /** Whether the server answers `ghostline/nextEdit` (its `experimental` capabilities say so). */
  private offered(client: LanguageClient): boolean {
    const experimental = client.initializeResult?.capabilities.experimental as { ghostline?: { nextEdit?: boolean } } | undefined;
    return experimental?.ghostline?.nextEdit === true;
  }

  private changed(event: vscode.TextDocumentChangeEvent): void {
    const editor = vscode.window.activeTextEditor;
    if (event.contentChanges.length === 0) return;
    // The document changed: what is shown was for a text that is gone.
    if (this.shown?.editor.document === event.document) this.clear();
    if (!editor || editor.document !== event.document) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.ask(editor), SETTLE_MS);
  }

  /** Asks for the next edits at the cursor of `editor`, and shows them unless the text moved on. */
  async ask(editor: vscode.TextEditor): Promise<void> {
    const client = this.client();
    if (!client || !this.enabled() || !this.offered(client)) return;
    this.asking?.cancel();
    const asking = (this.asking = new vscode.CancellationTokenSource());
    const document = editor.document;
    const version = document.version;
    let answer: { edits?: WireEdit[] } | null;
    try {
      const position = client.code2ProtocolConverter.asPosition(editor.selection.active);
      answer = await client.sendRequest(NEXT_EDIT_REQUEST, { textDocument: { uri: document.uri.toString() }, position }, asking.token);
    } catch (error) {
      if (!asking.token.isCancellationRequested) this.log(`${NEXT_EDIT_REQUEST} failed: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    if (asking.token.isCancellationRequested || document.version !== version || vscode.window.activeTextEditor !== editor) return;
    const uri = document.uri.toString();
    const all = answer?.edits ?? [];
    const edits = all
      .filter((e) => e.textDocument.uri === uri && e.textDocument.version === version)
      .map((e) => ({ range: client.protocol2CodeConverter.asRange(e.range), newText: e.newText }));
    const others = all
      .filter((e) => e.textDocument.uri !== uri)
      .map((e) => ({ uri: vscode.Uri.parse(e.textDocument.uri), version: e.textDocument.version, range: client.protocol2CodeConverter.asRange(e.range), newText: e.newText }));
    if (edits.length === 0) return;
    this.show({ editor, version, edits, others, command: all.find((e) => e.command)?.command });
  }

  private show(shown: Shown): void {
    this.clear();
    this.shown = shown;
    const files = new Set(shown.others.map((e) => e.uri.toString())).size;
    shown.editor.setDecorations(
      this.after,
      shown.edits.map((e, i) => ({
        range: new vscode.Range(e.range.end, e.range.end),
        renderOptions: { after: { contentText: label(e.newText) + (i === 0 ? elsewhere(shown.others.length, files) : "") } },
      })),
    );
    shown.editor.setDecorations(this.replaced, shown.edits.filter((e) => !e.range.isEmpty).map((e) => e.range));
    void vscode.commands.executeCommand("setContext", SHOWN_CONTEXT, true);
  }

  /** Removes what is shown. */
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const shown = this.shown;
    this.shown = undefined;
    if (!shown) return;
    shown.editor.setDecorations(this.after, []);
    shown.editor.setDecorations(this.replaced, []);
    void vscode.commands.executeCommand("setContext", SHOWN_CONTEXT, false);
  }

  /** What is shown in the active editor, while its document is still at that version. */
  private current(): Shown | undefined {
    const shown = this.shown;
    if (!shown || vscode.window.activeTextEditor !== shown.editor || shown.editor.document.version !== shown.version) return undefined;
    return shown;
  }

  /** "ghostline: Jump to / Accept Next Edit": the cursor to the first edit; there, apply them all. */
  async jumpOrAccept(): Promise<void> {
    const shown = this.current();
    if (!shown) {
      void vscode.window.setStatusBarMessage("ghostline: no next edit", 2000);
      return;
    }
    const first = shown.edits[0].range.start;
    if (shown.editor.selection.isEmpty && shown.editor.selection.active.isEqual(first)) {
      await this.accept();
      return;
    }
    shown.editor.selection = new vscode.Selection(first, first);
    shown.editor.revealRange(shown.edits[0].range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  /** "ghostline: Accept Next Edit": every edit of the proposal, other files' too, as one
   * workspace edit; an open document that moved past the version the edits were for is left. */
  async accept(): Promise<void> {
    const shown = this.current();
    if (!shown) return;
    this.clear();
    const edit = new vscode.WorkspaceEdit();
    for (const e of shown.edits) edit.replace(shown.editor.document.uri, e.range, e.newText);
    const open = new Map(vscode.workspace.textDocuments.map((d) => [d.uri.toString(), d.version]));
    for (const e of shown.others) {
      const now = open.get(e.uri.toString());
      if (e.version !== null && now !== e.version) continue;
      edit.replace(e.uri, e.range, e.newText);
    }
    const done = await vscode.workspace.applyEdit(edit);
    const client = this.client();
    if (done && shown.command && client) {
      const { command, arguments: args } = shown.command;
      client.sendRequest("workspace/executeCommand", { command, arguments: args ?? [] }).catch((error: unknown) => {
        this.log(`${command} failed: ${error instanceof Error ? error.message : String(error)}`);
      });
    }
    if (done) {
      const first = shown.edits[0].range.start;
      shown.editor.selection = new vscode.Selection(first, first);
    }
  }

  dispose(): void {
    this.clear();
    this.asking?.cancel();
    for (const s of this.subscriptions) s.dispose();
  }
}
