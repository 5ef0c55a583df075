// Next edits in VS Code: once an edit settles, asks the server for `ghostline/nextEdit` and shows
// each proposed edit as a decoration at its target (the replaced text marked, `→ new text`
// after it); the command "ghostline: Jump to / Accept Next Edit" (Alt+N) moves the cursor to
// the first edit and, pressed there, applies every edit of the proposal. Any change to the
// document clears what is shown; so does another editor.
import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";

export const NEXT_EDIT_REQUEST = "ghostline/nextEdit";
/** The context key the key bindings' `when` reads: a next edit is shown in the active editor. */
export const SHOWN_CONTEXT = "ghostline.nextEditShown";
/** No change for this long: the edit has settled, ask. */
const SETTLE_MS = 300;

interface WireEdit {
  textDocument: { uri: string; version: number };
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  newText: string;
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
    const edits = (answer?.edits ?? [])
      .filter((e) => e.textDocument.uri === uri && e.textDocument.version === version)
      .map((e) => ({ range: client.protocol2CodeConverter.asRange(e.range), newText: e.newText }));
    if (edits.length === 0) return;
    this.show({ editor, version, edits });
  }

  private show(shown: Shown): void {
    this.clear();
    this.shown = shown;
    shown.editor.setDecorations(
      this.after,
      shown.edits.map((e) => ({ range: new vscode.Range(e.range.end, e.range.end), renderOptions: { after: { contentText: label(e.newText) } } })),
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

  /** "ghostline: Accept Next Edit": every edit of the proposal, as one undoable change. */
  async accept(): Promise<void> {
    const shown = this.current();
    if (!shown) return;
    this.clear();
    const done = await shown.editor.edit((builder) => {
      for (const e of shown.edits) builder.replace(e.range, e.newText);
    });
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
