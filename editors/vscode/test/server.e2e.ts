// The packaged extension (dist/extension.js) and its vscode-languageclient 11, against the real
// ghostline server and test model, with a stand-in for VS Code's API (test/fake-vscode.ts):
// the client starts the server, the status bar follows the model load to "ready", a document
// is opened and typed into, and VS Code's inline completion provider (the one the client
// registers) returns the model's ghost text. Needs GHOSTLINE_BIN and GHOSTLINE_MODEL
// (scripts/test-editors.sh sets both).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { CancellationTokenSource, Position, TextDocument, Uri, fakeVscode, installVscode } from "./fake-vscode";

const root = join(__dirname, "..", "..");
const bin = process.env.GHOSTLINE_BIN ?? "";
const model = process.env.GHOSTLINE_MODEL ?? "";

/** Acceptance statistics in a file of this test's own; retention checked 1 s and 2 s after an accept. */
const statsDb = join(mkdtempSync(join(tmpdir(), "ghostline-vscode-stats-")), "stats.sqlite");
const settings: Record<string, unknown> = {
  "server.path": bin,
  "model.path": model,
  "completion.maxTokens": 24,
  "stats.path": statsDb,
  "stats.retentionSeconds": [1, 2],
  privacy: "local-only",
};
const fake = fakeVscode(settings);
let restore: () => void;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let extension: any;

async function until<T>(what: () => string, check: () => T | undefined, ms = 60_000, every = 20): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

before(async () => {
  assert.ok(existsSync(bin), `GHOSTLINE_BIN must name the ghostline binary (got ${JSON.stringify(bin)})`);
  assert.ok(existsSync(model), `GHOSTLINE_MODEL must name the test model (got ${JSON.stringify(model)})`);
  restore = installVscode(fake.vscode);
  extension = require(join(root, "dist", "extension.js"));
  await extension.activate({ subscriptions: [], extensionPath: join(root, "no-bundled-binary") });
});

after(async () => {
  await extension?.deactivate();
  restore?.();
});

test("the status bar follows the model load to ready", async () => {
  await until(
    () => `a ready status, got ${JSON.stringify(fake.seen.item)}; output:\n${fake.seen.output.join("\n")}`,
    () => String(fake.seen.item.tooltip ?? "").includes("model ready"),
  );
  // Ready and on: the sparkle icon (an error shows another), and the tooltip says how to toggle.
  assert.equal(fake.seen.item.text, "$(sparkle) ghostline", JSON.stringify(fake.seen.item));
  assert.match(String(fake.seen.item.tooltip), /\ncompletions on \(click to toggle\)$/);
  assert.equal(fake.seen.messages.filter((m) => m.kind === "error").length, 0, JSON.stringify(fake.seen.messages));
});

test("typing, then VS Code asks the client's inline completion provider: ghost text at the cursor", async () => {
  const doc = new TextDocument(
    Uri.file("/project/stats.py"),
    "python",
    '"""Small statistics helpers."""\nimport math\n\n\ndef mean(values):\n    """Return the arithmetic mean of values."""\n    return sum(values) / len(values)\n\n\ndef stdev(values):\n    """Return the population standard deviation of values."""\n    m = mean(values)\n',
  );
  fake.open(doc);
  // Keystrokes on the last line, one change event each, as VS Code sends them.
  let at = new Position(12, 0);
  for (const ch of "    return math.sq") {
    fake.change(doc.insert(at, ch));
    at = new Position(at.line, at.character + 1);
  }
  assert.equal(fake.seen.inlineProviders.length, 1, "the client registered one inline completion provider");
  const provider = fake.seen.inlineProviders[0];
  const token = new CancellationTokenSource().token;
  const result = (await provider.provideInlineCompletionItems(doc, at, { triggerKind: 1, selectedCompletionInfo: undefined }, token)) as
    | { items: { insertText: string; range?: { start: Position } }[] }
    | { insertText: string; range?: { start: Position } }[];
  const items = Array.isArray(result) ? result : result?.items;
  assert.ok(items && items.length > 0, `no inline item: ${JSON.stringify(result)}`);
  const text = typeof items[0].insertText === "string" ? items[0].insertText : (items[0].insertText as { value: string }).value;
  assert.ok(text.trim().length > 0, `empty ghost text: ${JSON.stringify(items[0])}`);
  assert.deepEqual(items[0].range?.start, at, "the ghost text starts at the cursor");
  // The latency of that suggestion is on the status bar.
  assert.match(String(fake.seen.item.text), /ghostline \d+ ms$/);

  // Accepting it: VS Code inserts the text, then runs the item's command, which the client
  // registered as a VS Code command that asks the server (workspace/executeCommand).
  const command = (items[0] as { command?: { command: string; arguments?: unknown[] } }).command;
  assert.equal(command?.command, "ghostline.accepted", `the item carries the accept command: ${JSON.stringify(items[0])}`);
  fake.change(doc.insert(at, text));
  const run = fake.seen.commands.get(command!.command);
  assert.ok(run, "the client registered the server's accept command");
  await run!(...(command!.arguments ?? []));
  // `ghostline stats` shows the accept and, after the (shortened) checks, all of it retained.
  const row = await until(
    () => `an accept with its retention in ${statsDb}`,
    () => {
      const report = JSON.parse(execFileSync(bin, ["stats", "--json", "--since", "all", "--db", statsDb], { encoding: "utf8" }));
      const first = report.rows[0];
      return first && first.retained_5m !== null ? first : undefined;
    },
    30_000,
    200,
  );
  assert.equal(row.accepted, 1, JSON.stringify(row));
  assert.equal(row.accepted_chars, [...text].length, JSON.stringify(row));
  assert.equal(row.retained_30s, 1, JSON.stringify(row));
  assert.equal(row.retained_5m, 1, JSON.stringify(row));
  const bytes = readFileSync(statsDb).toString("latin1");
  assert.ok(!bytes.includes("/project/stats.py") && !bytes.includes("arithmetic mean"), "no file name or code in the database");
});

test("toggling completions off: the provider answers nothing and the status bar says off", async () => {
  await fake.seen.commands.get("ghostline.toggleCompletions")!();
  assert.equal(settings["completion.enabled"], false);
  await until(() => `"(off)" in ${fake.seen.item.text}`, () => String(fake.seen.item.text).includes("(off)"), 5000);
  const doc = fake.seen.documents[0];
  const provider = fake.seen.inlineProviders[0];
  const none = await provider.provideInlineCompletionItems(doc, new Position(12, 18), { triggerKind: 1 }, new CancellationTokenSource().token);
  assert.equal(none, undefined);
  await fake.seen.commands.get("ghostline.toggleCompletions")!();
  assert.equal(settings["completion.enabled"], true);
  // The server took both settings changes: on again, it answers the provider again (had it
  // kept `completion.enabled: false`, it would answer nothing), and it showed no error for
  // either (a rejected setting is shown as an error message before the answer).
  // A new function at the end of the file, typed as before.
  let end = doc.positionAt(doc.getText().length);
  for (const ch of "\n\ndef norm(x, y):\n    return math.sq") {
    fake.change(doc.insert(end, ch));
    end = doc.positionAt(doc.offsetAt(end) + 1);
  }
  const deadline = Date.now() + 60_000;
  let answer: unknown;
  for (;;) {
    answer = await provider.provideInlineCompletionItems(doc, end, { triggerKind: 1 }, new CancellationTokenSource().token);
    const items = Array.isArray(answer) ? answer : (answer as { items?: unknown[] } | undefined)?.items;
    if (items && items.length > 0) break;
    assert.ok(Date.now() < deadline, `no suggestion once completions are on again (${fake.seen.item.text}): ${JSON.stringify(answer)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.deepEqual(fake.seen.messages.filter((m) => m.kind === "error"), []);
  assert.ok(!fake.seen.output.some((l) => /unknown|wrong type|keeping the previous settings/i.test(l)), fake.seen.output.join("\n"));
});

test("the route command says there is no routed action yet", async () => {
  await fake.seen.commands.get("ghostline.showLastRoute")!();
  const last = fake.seen.messages[fake.seen.messages.length - 1];
  assert.equal(last.kind, "info");
  assert.match(last.text, /no routed action yet/);
});
