// The server's stderr → the output channel, at the level each line was logged with.
// vscode-languageclient's default writes every stderr line with `error`, so ghostline's INFO
// lines (model loaded, memory plan) showed as "[error]" in a real VS Code's output.
// Pure (no `vscode` import) so it is unit-tested with node's test runner.

export type Level = "trace" | "debug" | "info" | "warn" | "error";

/** ghostline's `tracing` format without colour: `2026-01-01T00:00:00.000000Z  INFO target: message`. */
const TRACING = /^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s+)?(TRACE|DEBUG|INFO|WARN|ERROR)\s+(.*)$/;

/**
 * The level and text (without the timestamp: the channel adds its own) of one stderr line.
 * An indented line continues the previous message (multi-line fields, backtraces); any other
 * line that is not a `tracing` line (a panic message, a crash) is an error.
 */
export function stderrLine(line: string, previous: Level = "error"): { level: Level; text: string } {
  const match = TRACING.exec(line);
  if (match) return { level: match[1].toLowerCase() as Level, text: match[2] };
  if (/^\s/.test(line) && line.trim() !== "") return { level: previous, text: line };
  return { level: "error", text: line };
}
