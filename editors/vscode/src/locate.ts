// Finding the ghostline binary: the `ghostline.server.path` setting, then the binary bundled
// in the extension (`bin/ghostline`), then `ghostline` on PATH. Each candidate must answer
// `--version` with "ghostline <version>". Pure apart from the injected `probe`.
import * as path from "node:path";

/** Runs `<file> --version`; resolves with its stdout, rejects when it cannot run or fails. */
export type Probe = (file: string) => Promise<string>;

export interface Found {
  path: string;
  version: string;
  source: "setting" | "bundled" | "PATH";
}

export interface LocateInput {
  configured?: string;
  extensionDir: string;
  pathEnv?: string;
  platform?: NodeJS.Platform;
}

export function candidates(input: LocateInput): { path: string; source: Found["source"] }[] {
  const platform = input.platform ?? process.platform;
  const exe = platform === "win32" ? "ghostline.exe" : "ghostline";
  const p = platform === "win32" ? path.win32 : path.posix;
  const out: { path: string; source: Found["source"] }[] = [];
  const configured = input.configured?.trim();
  if (configured) out.push({ path: configured, source: "setting" });
  out.push({ path: p.join(input.extensionDir, "bin", exe), source: "bundled" });
  const sep = platform === "win32" ? ";" : ":";
  for (const dir of (input.pathEnv ?? "").split(sep)) {
    if (dir) out.push({ path: p.join(dir, exe), source: "PATH" });
  }
  return out;
}

/** "ghostline 0.1.0" → "0.1.0"; undefined when the output is not ghostline's. */
export function parseVersion(stdout: string): string | undefined {
  const match = /^ghostline\s+(\S+)/m.exec(stdout.trim());
  return match?.[1];
}

/**
 * The first candidate that runs and says it is ghostline. A configured path that fails is an
 * error (the user asked for that binary), not a reason to fall back silently.
 */
export async function locateServer(input: LocateInput, probe: Probe): Promise<Found> {
  const tried: string[] = [];
  for (const candidate of candidates(input)) {
    let version: string | undefined;
    let problem: string;
    try {
      version = parseVersion(await probe(candidate.path));
      problem = "its --version output is not ghostline's";
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    if (version !== undefined) return { path: candidate.path, version, source: candidate.source };
    if (candidate.source === "setting") {
      throw new Error(`ghostline.server.path = ${candidate.path}: ${problem}`);
    }
    tried.push(`${candidate.path} (${problem})`);
  }
  throw new Error(
    "ghostline was not found: set ghostline.server.path, or put `ghostline` on PATH " +
      "(cargo build --release → target/release/ghostline). Tried: " +
      tried.slice(0, 4).join("; ") + (tried.length > 4 ? `; … ${tried.length - 4} more` : ""),
  );
}
