import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { expandPath, toServerChange, toServerSettings } from "../src/config";

/** A reader over flat `ghostline.*` keys, as `workspace.getConfiguration("ghostline").get` is. */
const reader = (values: Record<string, unknown>) => (key: string) => values[key];

// What VS Code reports for an untouched configuration (package.json defaults).
const defaults = {
  "server.path": "",
  "model.path": "",
  "model.threads": null,
  "model.shared": null,
  "model.keepAlive": null,
  "model.contextSize": null,
  "model.batchSize": null,
  "model.gpuLayers": null,
  "model.memoryBudgetMb": null,
  "model.prefillChunk": null,
  "model.adaptiveThreads": null,
  "model.draft": null,
  "model.endpoint": "",
  "model.apiKeyEnv": "",
  "model.endpointTrusted": null,
  "model.endpointApi": "llama-server",
  "model.localFallback": true,
  "completion.enabled": true,
  "completion.generateAhead": true,
  "completion.maxTokens": null,
  "nextEdit.enabled": true,
  "cloud.endpoint": "",
  "cloud.model": "",
  "cloud.apiKeyEnv": "",
  "stats.enabled": true,
  "stats.path": "",
  "stats.retentionSeconds": null,
  privacy: "local-only",
  offline: false,
  "debug.logCode": false,
  "trace.server": "off",
};

test("defaults send only what the server needs: no empty strings, no nulls", () => {
  assert.deepEqual(toServerSettings(reader(defaults)), {
    completion: { enabled: true, generateAhead: true },
    nextEdit: { enabled: true },
    stats: { enabled: true },
    privacy: "local-only",
    offline: false,
  });
});

test("every setting maps to the server's camelCase key", () => {
  const settings = toServerSettings(
    reader({
      ...defaults,
      "server.path": "/opt/ghostline/bin/ghostline",
      "model.path": "/models/qwen2.5-coder-1.5b-q4_k_m.gguf",
      "model.threads": 4,
      "model.shared": true,
      "model.keepAlive": "10m",
      "model.contextSize": 8192,
      "model.batchSize": 256,
      "model.gpuLayers": 0,
      "model.memoryBudgetMb": 6000,
      "model.prefillChunk": 0,
      "model.adaptiveThreads": false,
      "model.draft": false,
      "model.endpoint": "https://models.example:8443",
      "model.apiKeyEnv": "TEAM_KEY",
      "model.endpointTrusted": true,
      "model.endpointApi": "vllm",
      "model.localFallback": false,
      "completion.enabled": false,
      "completion.generateAhead": false,
      "completion.maxTokens": 48,
      "nextEdit.enabled": false,
      "cloud.endpoint": "http://127.0.0.1:8080/v1",
      "cloud.model": "qwen2.5-coder-7b",
      "cloud.apiKeyEnv": "GHOSTLINE_API_KEY",
      "stats.enabled": false,
      "stats.path": "/tmp/stats.sqlite",
      "stats.retentionSeconds": [1, 2],
      privacy: "redact",
      offline: true,
      "debug.logCode": true,
      "trace.server": "verbose",
    }),
  );
  assert.deepEqual(settings, {
    model: {
      path: "/models/qwen2.5-coder-1.5b-q4_k_m.gguf",
      threads: 4,
      shared: true,
      keepAlive: "10m",
      contextSize: 8192,
      batchSize: 256,
      gpuLayers: 0,
      memoryBudgetMb: 6000,
      prefillChunk: 0,
      adaptiveThreads: false,
      draft: false,
      endpoint: "https://models.example:8443",
      apiKeyEnv: "TEAM_KEY",
      endpointTrusted: true,
      endpointApi: "vllm",
      localFallback: false,
    },
    completion: { enabled: false, generateAhead: false, maxTokens: 48 },
    nextEdit: { enabled: false },
    cloud: { endpoint: "http://127.0.0.1:8080/v1", model: "qwen2.5-coder-7b", apiKeyEnv: "GHOSTLINE_API_KEY" },
    stats: { enabled: false, path: "/tmp/stats.sqlite", retentionSeconds: [1, 2] },
    privacy: "redact",
    offline: true,
    debug: { logCode: true },
  });
  // Editor-only settings never reach the server (it would warn about unknown keys).
  assert.equal(JSON.stringify(settings).includes("trace"), false);
  assert.equal(JSON.stringify(settings).includes("/opt/ghostline"), false);
});

test("values of the wrong type are dropped, not sent", () => {
  const settings = toServerSettings(
    reader({
      ...defaults,
      "model.threads": 0,
      "model.shared": "yes",
      "model.keepAlive": " ",
      "model.contextSize": 0,
      "model.gpuLayers": -1,
      "model.prefillChunk": 1.5,
      "model.draft": 1,
      "completion.maxTokens": 2.5,
      "completion.enabled": "yes",
      "completion.generateAhead": 1,
      "nextEdit.enabled": "no",
      "model.endpoint": " ",
      privacy: "everything",
      offline: "true",
      "cloud.endpoint": "   ",
      "stats.enabled": "no",
      "stats.retentionSeconds": [300, 30],
      "debug.logCode": "yes",
    }),
  );
  assert.deepEqual(settings, {});
});

test("the API key itself is never a setting: only the variable's name is sent", () => {
  const settings = toServerSettings(reader({ ...defaults, "cloud.apiKeyEnv": " MY_KEY " }), { MY_KEY: "sk-secret" });
  assert.deepEqual(settings.cloud, { apiKeyEnv: "MY_KEY" });
  assert.equal(JSON.stringify(settings).includes("sk-secret"), false);
});

test("the endpoint's settings go only with an endpoint; a wrong API name is dropped", () => {
  const without = toServerSettings(reader({ ...defaults, "model.apiKeyEnv": "TEAM_KEY", "model.localFallback": false, "model.endpointTrusted": true }));
  assert.equal(without.model, undefined);
  const settings = toServerSettings(reader({ ...defaults, "model.endpoint": "http://127.0.0.1:8080", "model.endpointApi": "openai" }));
  assert.deepEqual(settings.model, { endpoint: "http://127.0.0.1:8080", localFallback: true });
});

test("model path: ~ and ${env:NAME} are expanded", () => {
  const env = { MODELS: "/srv/models" };
  assert.equal(toServerSettings(reader({ "model.path": "~/m.gguf" }), env, "/home/ada").model?.path, "/home/ada/m.gguf");
  assert.equal(toServerSettings(reader({ "model.path": "${env:MODELS}/m.gguf" }), env, "/home/ada").model?.path, "/srv/models/m.gguf");
  assert.equal(expandPath("~", env, "/home/ada"), "/home/ada");
  assert.equal(expandPath("a~/b", env, "/home/ada"), "a~/b");
  assert.equal(expandPath("${env:MISSING}/m.gguf", env, "/home/ada"), "/m.gguf");
});

test("an unset reader (no settings at all) gives an empty object", () => {
  assert.deepEqual(toServerSettings(() => undefined), {});
});

test("a change sends every managed key, a cleared one as null (the server layers changes)", () => {
  const set = toServerChange(reader({ ...defaults, "model.path": "/m.gguf", "cloud.endpoint": "http://h/v1" }));
  assert.deepEqual(set, {
    model: {
      path: "/m.gguf",
      threads: null,
      shared: null,
      keepAlive: null,
      contextSize: null,
      batchSize: null,
      gpuLayers: null,
      memoryBudgetMb: null,
      prefillChunk: null,
      adaptiveThreads: null,
      draft: null,
      endpoint: null, apiKeyEnv: null, endpointTrusted: null, endpointApi: null, localFallback: null },
    completion: { enabled: true, generateAhead: true, maxTokens: null },
    nextEdit: { enabled: true },
    cloud: { endpoint: "http://h/v1", model: null, apiKeyEnv: null },
    stats: { enabled: true, path: null, retentionSeconds: null },
    debug: { logCode: null },
    privacy: "local-only",
    offline: false,
  });
  // Cleared in the editor: null, so the server drops the value it had.
  const cleared = toServerChange(reader(defaults));
  assert.equal((cleared.model as Record<string, unknown>).path, null);
  assert.equal((cleared.cloud as Record<string, unknown>).endpoint, null);
});


test("the defaults above are package.json's, and every model setting there reaches the server", () => {
  // out/test/ → the extension's folder.
  const manifest = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));
  const properties: Record<string, { default: unknown }> = manifest.contributes.configuration.properties;
  const declared = Object.fromEntries(Object.entries(properties).map(([key, p]) => [key.replace(/^ghostline\./, ""), p.default]));
  assert.deepEqual(declared, defaults);
  const model = Object.keys(declared).filter((k) => k.startsWith("model.")).map((k) => k.slice("model.".length));
  const change = toServerChange(reader(defaults)).model as Record<string, unknown>;
  assert.deepEqual(Object.keys(change).sort(), model.sort());
});
