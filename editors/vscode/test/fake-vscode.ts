// A stand-in for the `vscode` module, enough for the extension bundle and vscode-languageclient
// to run outside VS Code: namespaces answer any `onX` with an event, any `registerX`/`createX`
// with a disposable, and the parts the tests look at (documents, configuration, the inline
// completion provider, the status-bar item, messages, commands) are real objects.
import Module from "node:module";

type Listener<T> = (e: T) => unknown;

export class Disposable {
  static from(...items: { dispose(): unknown }[]) {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  constructor(private readonly onDispose: () => unknown = () => {}) {}
  dispose() {
    this.onDispose();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  event = (listener: Listener<T>, thisArg?: unknown) => {
    const bound = thisArg ? listener.bind(thisArg) : listener;
    this.listeners.add(bound);
    return new Disposable(() => this.listeners.delete(bound));
  };
  fire(e: T) {
    for (const l of [...this.listeners]) l(e);
  }
  dispose() {
    this.listeners.clear();
  }
}

export class Uri {
  static parse(value: string) {
    const m = /^([a-z][\w+.-]*):(?:\/\/([^/]*))?([^?#]*)/i.exec(value);
    return new Uri(m?.[1] ?? "file", m?.[2] ?? "", decodeURIComponent(m?.[3] ?? value));
  }
  static file(path: string) {
    return new Uri("file", "", path);
  }
  constructor(public scheme: string, public authority: string, public path: string) {}
  get fsPath() {
    return this.path;
  }
  toString() {
    return `${this.scheme}://${this.authority}${encodeURI(this.path)}`;
  }
  toJSON() {
    return this.toString();
  }
  with(change: Partial<Uri>) {
    return new Uri(change.scheme ?? this.scheme, change.authority ?? this.authority, change.path ?? this.path);
  }
}

export class Position {
  constructor(public line: number, public character: number) {}
  isEqual(o: Position) {
    return o.line === this.line && o.character === this.character;
  }
}

export class Range {
  start: Position;
  end: Position;
  constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
    this.start = typeof a === "number" ? new Position(a, b as number) : a;
    this.end = typeof a === "number" ? new Position(c!, d!) : (b as Position);
  }
}

export class InlineCompletionItem {
  constructor(public insertText: string | { value: string }, public range?: Range, public command?: unknown) {}
}

export class InlineCompletionList {
  constructor(public items: InlineCompletionItem[]) {}
}

export class CancellationTokenSource {
  private emitter = new EventEmitter<void>();
  token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel() {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose() {}
}

/** A text document whose text the test edits; `change` returns VS Code's change event. */
export class TextDocument {
  version = 1;
  isClosed = false;
  isDirty = false;
  isUntitled = false;
  eol = 1;
  constructor(public uri: Uri, public languageId: string, private text: string) {}
  get fileName() {
    return this.uri.fsPath;
  }
  get lineCount() {
    return this.text.split("\n").length;
  }
  getText() {
    return this.text;
  }
  offsetAt(p: Position) {
    const lines = this.text.split("\n");
    return lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
  }
  positionAt(offset: number) {
    const before = this.text.slice(0, offset).split("\n");
    return new Position(before.length - 1, before[before.length - 1].length);
  }
  /** Inserts `text` at `at` (UTF-16 positions, as VS Code counts). */
  insert(at: Position, text: string) {
    const offset = this.offsetAt(at);
    this.text = this.text.slice(0, offset) + text + this.text.slice(offset);
    this.version += 1;
    return {
      document: this,
      contentChanges: [{ range: new Range(at, at), rangeOffset: offset, rangeLength: 0, text }],
      reason: undefined,
    };
  }
}

const enumLike = (names: string[], start = 0) => Object.fromEntries(names.map((n, i) => [n, i + start]));

/** Builds the module and a record of what the extension did with it. */
export function fakeVscode(settings: Record<string, unknown>) {
  const seen = {
    item: {} as Record<string, unknown> & { text?: string; tooltip?: string },
    commands: new Map<string, (...args: unknown[]) => unknown>(),
    messages: [] as { kind: string; text: string }[],
    inlineProviders: [] as { provideInlineCompletionItems: (...a: unknown[]) => Promise<unknown> }[],
    documents: [] as TextDocument[],
    output: [] as string[],
  };
  const events = {
    open: new EventEmitter<TextDocument>(),
    change: new EventEmitter<unknown>(),
    configuration: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  };
  const disposable = () => new Disposable();
  /** Any member not given: `onX` → an event, anything else → a function returning a disposable. */
  const permissive = (given: Record<string, unknown>) =>
    new Proxy(given, {
      get(target, prop) {
        if (typeof prop !== "string" || prop in target) return target[prop as string];
        if (prop.startsWith("on")) return () => disposable();
        return () => new Proxy({ dispose() {} }, { get: (t, p) => (p in t ? (t as Record<string | symbol, unknown>)[p] : () => undefined) });
      },
    });
  const message = (kind: string) => async (text: string) => {
    seen.messages.push({ kind, text });
    return undefined;
  };
  const outputChannel = () => ({
    name: "ghostline",
    logLevel: 3,
    onDidChangeLogLevel: () => disposable(),
    append: (s: string) => seen.output.push(s),
    appendLine: (s: string) => seen.output.push(s),
    trace: (s: string) => seen.output.push(s),
    debug: (s: string) => seen.output.push(s),
    info: (s: string) => seen.output.push(s),
    warn: (s: string) => seen.output.push(s),
    error: (s: unknown) => seen.output.push(String(s instanceof Error ? s.stack : s)),
    replace() {}, clear() {}, show() {}, hide() {}, dispose() {},
  });
  const configuration = (section?: string) => ({
    get: (key: string, fallback?: unknown) => {
      const full = section && section !== "ghostline" ? `${section}.${key}` : key;
      return full in settings ? settings[full] : fallback;
    },
    has: (key: string) => key in settings,
    inspect: () => undefined,
    update: async (key: string, value: unknown) => {
      settings[key] = value;
      events.configuration.fire({ affectsConfiguration: (s: string) => s === "ghostline" || `ghostline.${key}`.startsWith(s) });
    },
  });

  const vscode: Record<string, unknown> = {
    version: "1.91.0",
    Disposable, EventEmitter, Uri, Position, Range, InlineCompletionItem, InlineCompletionList, CancellationTokenSource,
    CancellationError: class extends Error {},
    ThemeColor: class { constructor(public id: string) {} },
    MarkdownString: class { constructor(public value = "") {} },
    SnippetString: class { constructor(public value = "") {} },
    StatusBarAlignment: { Left: 1, Right: 2 },
    ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
    LogLevel: enumLike(["Off", "Trace", "Debug", "Info", "Warning", "Error"]),
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    InlineCompletionTriggerKind: { Invoke: 0, Automatic: 1 },
    env: { language: "en", appName: "VS Code stand-in", machineId: "test", openExternal: async () => true },
    window: permissive({
      createOutputChannel: outputChannel,
      createStatusBarItem: () => Object.assign(seen.item, { show() { seen.item.shown = true; }, hide() {}, dispose() {} }),
      showErrorMessage: message("error"),
      showWarningMessage: message("warning"),
      showInformationMessage: message("info"),
      setStatusBarMessage: () => disposable(),
      withProgress: async (_options: unknown, task: (p: unknown, t: unknown) => Promise<unknown>) =>
        task({ report() {} }, new CancellationTokenSource().token),
      activeTextEditor: undefined,
      visibleTextEditors: [],
      tabGroups: { all: [], onDidChangeTabs: () => disposable(), onDidChangeTabGroups: () => disposable() },
    }),
    workspace: permissive({
      getConfiguration: configuration,
      workspaceFolders: undefined,
      get textDocuments() {
        return seen.documents;
      },
      notebookDocuments: [],
      onDidOpenTextDocument: events.open.event,
      onDidChangeTextDocument: events.change.event,
      onDidChangeConfiguration: events.configuration.event,
      getWorkspaceFolder: () => undefined,
    }),
    languages: permissive({
      match: (selector: { scheme?: string }[], document: TextDocument) =>
        selector.some((s) => !s.scheme || s.scheme === document.uri.scheme) ? 10 : 0,
      registerInlineCompletionItemProvider: (_selector: unknown, provider: (typeof seen.inlineProviders)[number]) => {
        seen.inlineProviders.push(provider);
        return disposable();
      },
    }),
    commands: permissive({
      registerCommand: (id: string, fn: (...args: unknown[]) => unknown) => {
        seen.commands.set(id, fn);
        return new Disposable(() => seen.commands.delete(id));
      },
      executeCommand: async (id: string, ...args: unknown[]) => seen.commands.get(id)?.(...args),
    }),
    extensions: permissive({ all: [] }),
  };
  // Enums the client's converters read when they are created: any member is its own name.
  const anyEnum = () => new Proxy({}, { get: (_t, prop) => String(prop) });
  for (const name of [
    "CodeActionKind", "CodeActionTriggerKind", "CompletionItemKind", "CompletionItemTag", "CompletionTriggerKind",
    "DiagnosticSeverity", "DiagnosticTag", "DocumentHighlightKind", "FileType", "FoldingRangeKind",
    "NotebookCellKind", "SignatureHelpTriggerKind", "SymbolKind", "SymbolTag", "TextDocumentSaveReason",
  ]) {
    vscode[name] = anyEnum();
  }
  // vscode-languageclient subclasses these when it loads; bundles copy the module's own keys.
  for (const name of [
    "CallHierarchyItem", "CodeAction", "CodeLens", "CompletionItem", "Diagnostic",
    "DocumentLink", "InlayHint", "SymbolInformation", "TypeHierarchyItem",
  ]) {
    vscode[name] ??= class {};
  }

  const open = (document: TextDocument) => {
    seen.documents.push(document);
    events.open.fire(document);
  };
  const change = (event: unknown) => events.change.fire(event);
  return { vscode, seen, open, change };
}

/** Makes `require("vscode")` return `vscode` until the returned function is called. */
export function installVscode(vscode: unknown): () => void {
  const mod = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const load = mod._load;
  mod._load = (request: string, ...rest: unknown[]) => (request === "vscode" ? vscode : load(request, ...rest));
  return () => {
    mod._load = load;
  };
}
