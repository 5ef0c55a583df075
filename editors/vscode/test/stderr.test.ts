import assert from "node:assert/strict";
import { test } from "node:test";

import { stderrLine } from "../src/stderr";

test("tracing lines keep their level and lose the timestamp", () => {
  assert.deepEqual(
    stderrLine("2026-12-01T01:28:18.385843Z  INFO ghostline::model::llama: memory: context 4096 tokens"),
    { level: "info", text: "ghostline::model::llama: memory: context 4096 tokens" },
  );
  assert.deepEqual(stderrLine("2026-12-01T01:28:34.207255Z DEBUG ghostline::lsp: suggestion ttft_ms=4424.4"), {
    level: "debug",
    text: "ghostline::lsp: suggestion ttft_ms=4424.4",
  });
  assert.equal(stderrLine("2026-12-01T01:28:34Z  WARN ghostline::config: unknown key").level, "warn");
  assert.equal(stderrLine("2026-12-01T01:28:34.1Z ERROR ghostline::lsp: the model thread died").level, "error");
  assert.equal(stderrLine("TRACE ghostline::lsp: no timestamp").level, "trace");
});

test("indented lines continue the previous message; anything else is an error", () => {
  assert.deepEqual(stderrLine("    at ghostline::engine", "info"), { level: "info", text: "    at ghostline::engine" });
  assert.equal(stderrLine("thread 'main' panicked at server/src/lsp/mod.rs:10:5:", "info").level, "error");
  assert.equal(stderrLine("", "debug").level, "error");
  assert.equal(stderrLine("INFORMATION is not a level").level, "error");
});
