import assert from "node:assert/strict";
import { test } from "node:test";

import { DownloadToasts, fillCapabilities } from "../src/firstRun";

test("the download's $/progress becomes one toast with increments; other progress is left alone", () => {
  const events: string[] = [];
  const toasts = new DownloadToasts((title) => {
    events.push(`open ${title}`);
    return { report: (inc, msg) => events.push(`+${inc} ${msg}`), done: () => events.push("done") };
  });
  const token = "ghostline/pull/7";
  assert.equal(toasts.handle("ghostline/model-load/7/0", { kind: "begin", title: "ghostline: loading model" }), false);
  assert.equal(toasts.handle(token, { kind: "begin", title: "ghostline: downloading qwen2.5-coder-1.5b", percentage: 0 }), true);
  toasts.handle(token, { kind: "report", percentage: 40, message: "40 of 100 MB, 20.0 MB/s" });
  toasts.handle(token, { kind: "report", percentage: 100, message: "100 of 100 MB, 25.0 MB/s" });
  toasts.handle(token, { kind: "end", message: "downloaded; loading the model" });
  assert.deepEqual(events, [
    "open ghostline: downloading qwen2.5-coder-1.5b",
    "+40 40 of 100 MB, 20.0 MB/s",
    "+60 100 of 100 MB, 25.0 MB/s",
    "done",
  ]);
});

test("the client says it opens a file dialog, keeping other experimental capabilities", () => {
  const caps: { experimental?: unknown } = { experimental: { other: 1 } };
  fillCapabilities(caps);
  assert.deepEqual(caps.experimental, { other: 1, ghostline: { chooseModel: true } });
});
