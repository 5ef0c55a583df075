import assert from "node:assert/strict";
import { test } from "node:test";

import { MODEL_PROGRESS_TITLE, Status } from "../src/status";

const TOKEN = "ghostline/model-load/42";

test("model load: begin → report % → end 'ready: <format>', as the server sends it", () => {
  const s = new Status();
  assert.equal(s.model.kind, "starting");
  s.progress(TOKEN, { kind: "begin", title: MODEL_PROGRESS_TITLE, percentage: 0 });
  assert.match(s.view().text, /ghostline 0%/);
  s.progress(TOKEN, { kind: "report", percentage: 57 });
  assert.match(s.view().text, /ghostline 57%/);
  s.progress(TOKEN, { kind: "end", message: "ready: Q4_1" });
  assert.deepEqual(s.model, { kind: "ready", detail: "Q4_1" });
  assert.match(s.view().tooltip, /model ready \(Q4_1\)/);
  assert.equal(s.view().error, false);
});

test("'model ready' in a log message is enough (clients without progress)", () => {
  const s = new Status();
  s.log("ghostline: model ready (/m.gguf, Q4_1, 180 ms)");
  assert.equal(s.model.kind, "ready");
});

test("a failed load: progress ends 'failed', then the error message names the problem", () => {
  const s = new Status();
  s.progress(TOKEN, { kind: "begin", title: MODEL_PROGRESS_TITLE, percentage: 0 });
  s.progress(TOKEN, { kind: "end", message: "failed" });
  assert.equal(s.model.kind, "error");
  s.showMessage(1, "ghostline: /m.gguf: not a GGUF file");
  assert.deepEqual(s.model, { kind: "error", message: "/m.gguf: not a GGUF file" });
  assert.equal(s.view().error, true);
  assert.match(s.view().tooltip, /not a GGUF file/);
});

test("no model configured (a warning) is shown as an error; a later bad setting does not unset ready", () => {
  const s = new Status();
  s.showMessage(2, "ghostline: no model configured; set `model.path` in the settings");
  assert.equal(s.model.kind, "error");

  const t = new Status();
  t.log("ghostline: model ready (x)");
  t.showMessage(1, "ghostline: completion.maxTokens must be a number; keeping the previous settings");
  assert.equal(t.model.kind, "ready");
});

test("latency and the on/off state show in the text", () => {
  const s = new Status();
  s.log("model ready");
  s.latency(123.4);
  assert.match(s.view().text, /ghostline 123 ms$/);
  s.enabled = false;
  assert.match(s.view().text, /\(off\)/);
  assert.match(s.view().tooltip, /completions off/);
});

test("routed actions: their progress title is the last route; none yet says so", () => {
  const s = new Status();
  assert.match(s.routeReport(), /no routed action yet/);
  s.progress("action-1", { kind: "begin", title: "Generate tests for `parse` — local: prompt fits the local context" });
  s.progress("action-1", { kind: "end" });
  assert.equal(s.routeReport(), "Generate tests for `parse` — local: prompt fits the local context");
  // Other progress does not disturb the model state.
  assert.equal(s.model.kind, "starting");
});

test("the first run's download shows in the status bar, then the load takes over", () => {
  const s = new Status();
  const pull = "ghostline/pull/42";
  s.progress(pull, { kind: "begin", title: "ghostline: downloading qwen2.5-coder-1.5b", percentage: 0 });
  s.progress(pull, { kind: "report", percentage: 30, message: "30 of 100 MB, 12.0 MB/s" });
  assert.match(s.view().text, /cloud-download\) ghostline 30%/);
  assert.match(s.view().tooltip, /downloading/);
  s.progress(pull, { kind: "end", message: "downloaded; loading the model" });
  s.progress(TOKEN, { kind: "begin", title: MODEL_PROGRESS_TITLE, percentage: 0 });
  s.progress(TOKEN, { kind: "end", message: "ready: Q8_0" });
  assert.deepEqual(s.model, { kind: "ready", detail: "Q8_0" });
});

test("'Not now' to the first-run question: the status bar says there is no model", () => {
  const s = new Status();
  s.log("ghostline: no model configured, none downloaded (not now): completions are off this session; set model.path, …");
  assert.equal(s.model.kind, "error");
  assert.match(s.view().tooltip, /none downloaded \(not now\)/);
});

test("a discovered model's info message ('no model configured; using … found in …') is not an error", () => {
  const s = new Status();
  s.progress(TOKEN, { kind: "begin", title: MODEL_PROGRESS_TITLE, percentage: 0 });
  s.progress(TOKEN, { kind: "end", message: "ready: Q4_1" });
  s.showMessage(3, "ghostline: no model configured; using /hf/hub/models--o--r/snapshots/c/m.gguf found in Hugging Face cache: …");
  assert.equal(s.model.kind, "ready");
  s.showMessage(2, "ghostline: no model configured, and none found in the Hugging Face, LM Studio, llama.cpp or Ollama folders");
  assert.equal(s.model.kind, "error");
});
