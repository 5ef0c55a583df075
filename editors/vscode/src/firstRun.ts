// The first run in VS Code. The server asks with `window/showMessageRequest` (shown by
// vscode-languageclient as a notification with buttons); this adds what the server cannot do:
// a file dialog on "Choose a file…" (the server sends `ghostline/chooseModel` to a client that
// declares `experimental.ghostline.chooseModel`), and a notification progress toast for the
// download's `$/progress` (the client shows server progress only in the status bar). Pure apart
// from the injected `open`.
import type { ProgressValue } from "./status";

export const CHOOSE_MODEL_NOTIFICATION = "ghostline/chooseModel";
/** The server's `$/progress` tokens for the first-run download. */
export const DOWNLOAD_TOKEN_PREFIX = "ghostline/pull/";

/** The client capability that tells the server this client opens a file dialog. */
export function fillCapabilities(capabilities: { experimental?: unknown }): void {
  const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
  capabilities.experimental = { ...experimental, ghostline: { chooseModel: true } };
}

/** A progress toast: `report` takes an increment in percent, `done` closes it. */
export interface Toast {
  report(increment: number, message?: string): void;
  done(): void;
}

/** The download's `$/progress` as toasts, one per token. */
export class DownloadToasts {
  private open = new Map<string | number, { toast: Toast; percent: number }>();

  constructor(private readonly show: (title: string) => Toast) {}

  /** Returns whether the value belonged to a download. */
  handle(token: string | number, value: ProgressValue): boolean {
    if (typeof token !== "string" || !token.startsWith(DOWNLOAD_TOKEN_PREFIX)) return false;
    if (value.kind === "begin") {
      this.open.set(token, { toast: this.show(value.title), percent: value.percentage ?? 0 });
      return true;
    }
    const entry = this.open.get(token);
    if (!entry) return true;
    if (value.kind === "report") {
      const percent = value.percentage ?? entry.percent;
      entry.toast.report(Math.max(0, percent - entry.percent), value.message);
      entry.percent = Math.max(entry.percent, percent);
    } else {
      entry.toast.done();
      this.open.delete(token);
    }
    return true;
  }
}
