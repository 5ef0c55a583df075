// Settings → the server's initializationOptions / didChangeConfiguration payload.
// Pure (no `vscode` import) so it is unit-tested with node's test runner.

/** Reads one setting under `ghostline.` (e.g. `get("model.path")`); undefined when unset. */
export type SettingsReader = (key: string) => unknown;

export type Privacy = "local-only" | "redact" | "allow";

/** What the server accepts (README "Configuration"); keys absent here keep the server's defaults. */
export interface ServerSettings {
  model?: {
    path?: string;
    threads?: number;
    shared?: boolean;
    keepAlive?: number | string;
    contextSize?: number;
    batchSize?: number;
    gpuLayers?: number;
    memoryBudgetMb?: number;
    prefillChunk?: number;
    adaptiveThreads?: boolean;
    draft?: boolean;
    endpoint?: string;
    apiKeyEnv?: string;
    endpointTrusted?: boolean;
    endpointApi?: EndpointApi;
    localFallback?: boolean;
  };
  completion?: { enabled?: boolean; generateAhead?: boolean; maxTokens?: number };
  nextEdit?: { enabled?: boolean };
  cloud?: { endpoint?: string; model?: string; apiKeyEnv?: string };
  stats?: { enabled?: boolean; path?: string; retentionSeconds?: [number, number] };
  privacy?: Privacy;
  offline?: boolean;
  debug?: { logCode?: boolean };
}

export type EndpointApi = "llama-server" | "vllm";

const PRIVACY: readonly Privacy[] = ["local-only", "redact", "allow"];
const ENDPOINT_API: readonly EndpointApi[] = ["llama-server", "vllm"];

function flag(value: unknown): boolean | undefined {
  return typeof value === "boolean" ? value : undefined;
}

function text(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const trimmed = value.trim();
  return trimmed === "" ? undefined : trimmed;
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined;
}

function naturalInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** `model.keepAlive`: seconds, or a duration string the server reads (`"10m"`, `"never"`). */
function duration(value: unknown): number | string | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined;
  return text(value);
}

/** `~` and `~/…` become the home folder; `${env:NAME}` the variable's value. */
export function expandPath(path: string, env: NodeJS.ProcessEnv, home: string): string {
  let out = path.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => env[name] ?? "");
  if (out === "~") out = home;
  else if (out.startsWith("~/") || out.startsWith("~\\")) out = home + out.slice(1);
  return out;
}

/** Two positive numbers of seconds, the second not below the first (`stats.retentionSeconds`). */
function retention(value: unknown): [number, number] | undefined {
  if (!Array.isArray(value) || value.length !== 2) return undefined;
  const [a, b] = value as unknown[];
  return typeof a === "number" && typeof b === "number" && a > 0 && b >= a ? [a, b] : undefined;
}

function prune<T extends object>(section: T): T | undefined {
  const entries = Object.entries(section).filter(([, v]) => v !== undefined);
  return entries.length === 0 ? undefined : (Object.fromEntries(entries) as T);
}

/**
 * Maps the extension's settings to the server's settings object. Empty strings and unset
 * numbers are left out (the server then uses its defaults, e.g. `$GHOSTLINE_MODEL`); values of
 * the wrong type are dropped here rather than sent, so the server never rejects the whole set.
 * Editor-only settings (`server.path`, `trace.server`) are never sent, and the endpoint's
 * settings (`model.apiKeyEnv`, `endpointTrusted`, `endpointApi`, `localFallback`) only with
 * `model.endpoint`.
 */
export function toServerSettings(
  get: SettingsReader,
  env: NodeJS.ProcessEnv = {},
  home = "",
): ServerSettings {
  const modelPath = text(get("model.path"));
  const endpoint = text(get("model.endpoint"));
  const endpointApi = get("model.endpointApi");
  const privacy = get("privacy");
  const offline = get("offline");
  const enabled = get("completion.enabled");
  const generateAhead = get("completion.generateAhead");
  const statsEnabled = get("stats.enabled");
  const statsPath = text(get("stats.path"));
  const logCode = get("debug.logCode");
  const settings: ServerSettings = {
    model: prune({
      path: modelPath === undefined ? undefined : expandPath(modelPath, env, home),
      threads: positiveInt(get("model.threads")),
      shared: flag(get("model.shared")),
      keepAlive: duration(get("model.keepAlive")),
      contextSize: positiveInt(get("model.contextSize")),
      batchSize: positiveInt(get("model.batchSize")),
      gpuLayers: naturalInt(get("model.gpuLayers")),
      memoryBudgetMb: positiveInt(get("model.memoryBudgetMb")),
      prefillChunk: naturalInt(get("model.prefillChunk")),
      adaptiveThreads: flag(get("model.adaptiveThreads")),
      draft: flag(get("model.draft")),
      // The endpoint's other keys only with an endpoint: without one they mean nothing.
      endpoint,
      apiKeyEnv: endpoint === undefined ? undefined : text(get("model.apiKeyEnv")),
      endpointTrusted: endpoint === undefined ? undefined : flag(get("model.endpointTrusted")),
      endpointApi: endpoint !== undefined && ENDPOINT_API.includes(endpointApi as EndpointApi) ? (endpointApi as EndpointApi) : undefined,
      localFallback: endpoint === undefined ? undefined : flag(get("model.localFallback")),
    }),
    completion: prune({
      enabled: typeof enabled === "boolean" ? enabled : undefined,
      generateAhead: typeof generateAhead === "boolean" ? generateAhead : undefined,
      maxTokens: positiveInt(get("completion.maxTokens")),
    }),
    nextEdit: prune({ enabled: flag(get("nextEdit.enabled")) }),
    cloud: prune({
      endpoint: text(get("cloud.endpoint")),
      model: text(get("cloud.model")),
      apiKeyEnv: text(get("cloud.apiKeyEnv")),
    }),
    stats: prune({
      enabled: typeof statsEnabled === "boolean" ? statsEnabled : undefined,
      path: statsPath === undefined ? undefined : expandPath(statsPath, env, home),
      retentionSeconds: retention(get("stats.retentionSeconds")),
    }),
    privacy: PRIVACY.includes(privacy as Privacy) ? (privacy as Privacy) : undefined,
    offline: typeof offline === "boolean" ? offline : undefined,
    // Off is the server's default: sent only when on.
    debug: prune({ logCode: logCode === true ? true : undefined }),
  };
  return prune(settings) ?? {};
}

/** The server keys `toServerSettings` can send, per section. */
const SENT_KEYS = {
  model: [
    "path",
    "threads",
    "shared",
    "keepAlive",
    "contextSize",
    "batchSize",
    "gpuLayers",
    "memoryBudgetMb",
    "prefillChunk",
    "adaptiveThreads",
    "draft",
    "endpoint", "apiKeyEnv", "endpointTrusted", "endpointApi", "localFallback"],
  completion: ["enabled", "generateAhead", "maxTokens"],
  nextEdit: ["enabled"],
  cloud: ["endpoint", "model", "apiKeyEnv"],
  stats: ["enabled", "path", "retentionSeconds"],
  debug: ["logCode"],
} as const;

/**
 * The `workspace/didChangeConfiguration` payload. The server lays a change over the settings in
 * force key by key (README "Configuration"), so a key left out keeps its old value: every key
 * this extension manages is sent, a cleared one as `null` (the server's default again, e.g.
 * `$GHOSTLINE_MODEL` for `model.path`).
 */
export function toServerChange(
  get: SettingsReader,
  env: NodeJS.ProcessEnv = {},
  home = "",
): Record<string, unknown> {
  const settings = toServerSettings(get, env, home) as Record<string, Record<string, unknown> | unknown>;
  const change: Record<string, unknown> = {};
  for (const [section, keys] of Object.entries(SENT_KEYS)) {
    const values = (settings[section] ?? {}) as Record<string, unknown>;
    change[section] = Object.fromEntries(keys.map((key) => [key, values[key] ?? null]));
  }
  change.privacy = settings.privacy ?? null;
  change.offline = settings.offline ?? null;
  return change;
}
