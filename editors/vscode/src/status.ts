// The status-bar state: model loading / ready / error, completions on or off, last latency, and
// the last routed action. Pure (no `vscode` import); the extension renders `view()`.

export type ModelState =
  | { kind: "starting" }
  | { kind: "loading"; percent?: number }
  | { kind: "downloading"; percent?: number }
  | { kind: "ready"; detail?: string }
  | { kind: "error"; message: string }
  | { kind: "stopped" };

/** LSP `$/progress` values (WorkDoneProgressBegin | Report | End). */
export type ProgressValue =
  | { kind: "begin"; title: string; message?: string; percentage?: number }
  | { kind: "report"; message?: string; percentage?: number }
  | { kind: "end"; message?: string };

export const MODEL_PROGRESS_TITLE = "ghostline: loading model";
/** The first run's download (`ghostline: downloading <model>`). */
export const DOWNLOAD_PROGRESS_TITLE = /^ghostline: downloading /;

export interface StatusView {
  text: string;
  tooltip: string;
  error: boolean;
}

export class Status {
  model: ModelState = { kind: "starting" };
  enabled = true;
  lastLatencyMs?: number;
  /** The last action's route and reason, from its `$/progress` title (issue 5's code actions). */
  lastRoute?: string;
  private progressTitles = new Map<string | number, string>();

  progress(token: string | number, value: ProgressValue): void {
    if (value.kind === "begin") {
      this.progressTitles.set(token, value.title);
      if (value.title === MODEL_PROGRESS_TITLE) {
        this.model = { kind: "loading", percent: value.percentage };
      } else if (DOWNLOAD_PROGRESS_TITLE.test(value.title)) {
        this.model = { kind: "downloading", percent: value.percentage };
      } else {
        this.lastRoute = value.message ? `${value.title}: ${value.message}` : value.title;
      }
      return;
    }
    const title = this.progressTitles.get(token);
    if (title !== undefined && DOWNLOAD_PROGRESS_TITLE.test(title)) {
      if (value.kind === "report" && this.model.kind === "downloading") this.model = { kind: "downloading", percent: value.percentage };
      if (value.kind === "end") this.progressTitles.delete(token);
      return;
    }
    if (title !== MODEL_PROGRESS_TITLE) {
      if (value.kind === "end") this.progressTitles.delete(token);
      return;
    }
    if (value.kind === "report") {
      if (this.model.kind === "loading" || this.model.kind === "starting") {
        this.model = { kind: "loading", percent: value.percentage ?? (this.model.kind === "loading" ? this.model.percent : undefined) };
      }
    } else {
      this.progressTitles.delete(token);
      const message = value.message ?? "";
      // The server ends the load with "ready: <format>"; anything else is a failure.
      if (message.startsWith("ready")) {
        this.model = { kind: "ready", detail: message.replace(/^ready:?\s*/, "") || undefined };
      } else if (this.model.kind !== "error") {
        this.model = { kind: "error", message: message || "the model did not load" };
      }
    }
  }

  /** `window/logMessage`: "model ready" means ready even without `$/progress`. */
  log(message: string): void {
    if (/\bmodel ready\b/.test(message) && this.model.kind !== "ready") this.model = { kind: "ready" };
    // "Not now" to the first-run question: no model this session.
    else if (/no model configured, none downloaded/.test(message)) this.model = { kind: "error", message: message.replace(/^ghostline:\s*/, "") };
  }

  /**
   * `window/showMessage` (LSP MessageType: 1 error, 2 warning). A load failure is an error while
   * the model is not ready; "no model configured" is a warning. A bad setting reported once the
   * model is ready leaves the model's state alone.
   */
  showMessage(type: number, message: string): void {
    const text = message.replace(/^ghostline:\s*/, "");
    // (An info message "no model configured; using … found in …" names a discovered model.)
    if (type <= 2 && /no model configured/.test(text)) this.model = { kind: "error", message: text };
    else if (type === 1 && this.model.kind !== "ready") this.model = { kind: "error", message: text };
  }

  latency(ms: number): void {
    this.lastLatencyMs = Math.round(ms);
  }

  view(): StatusView {
    const latency = this.lastLatencyMs === undefined ? "" : ` ${this.lastLatencyMs} ms`;
    const off = this.enabled ? "" : " (off)";
    switch (this.model.kind) {
      case "starting":
        return { text: "$(loading~spin) ghostline", tooltip: "ghostline: starting the server", error: false };
      case "loading": {
        const pct = this.model.percent === undefined ? "" : ` ${this.model.percent}%`;
        return { text: `$(loading~spin) ghostline${pct}`, tooltip: "ghostline: loading the model", error: false };
      }
      case "downloading": {
        const pct = this.model.percent === undefined ? "" : ` ${this.model.percent}%`;
        return { text: `$(cloud-download) ghostline${pct}`, tooltip: "ghostline: downloading the model (first run)", error: false };
      }
      case "ready":
        return {
          text: `$(${this.enabled ? "sparkle" : "circle-slash"}) ghostline${off}${latency}`,
          tooltip:
            `ghostline: model ready${this.model.detail ? ` (${this.model.detail})` : ""}` +
            `\ncompletions ${this.enabled ? "on" : "off"} (click to toggle)` +
            (this.lastLatencyMs === undefined ? "" : `\nlast suggestion: ${this.lastLatencyMs} ms`),
          error: false,
        };
      case "error":
        return { text: "$(error) ghostline", tooltip: `ghostline: ${this.model.message}`, error: true };
      case "stopped":
        return { text: "$(debug-stop) ghostline", tooltip: "ghostline: server stopped", error: true };
    }
  }

  routeReport(): string {
    return this.lastRoute ?? "ghostline: no routed action yet (code actions report where they ran and why).";
  }
}
