import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { candidates, locateServer, parseVersion } from "../src/locate";

/** The extension's real probe: runs the file with --version. */
const probe = (file: string) =>
  new Promise<string>((resolve, reject) =>
    execFile(file, ["--version"], { timeout: 5000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
  );

function script(dir: string, name: string, body: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

test("order: setting, bundled bin/, then each PATH entry", () => {
  const list = candidates({ configured: "/x/ghostline", extensionDir: "/ext", pathEnv: "/a:/b", platform: "linux" });
  assert.deepEqual(list, [
    { path: "/x/ghostline", source: "setting" },
    { path: "/ext/bin/ghostline", source: "bundled" },
    { path: "/a/ghostline", source: "PATH" },
    { path: "/b/ghostline", source: "PATH" },
  ]);
  const win = candidates({ extensionDir: "C:\\ext", pathEnv: "C:\\tools;D:\\bin", platform: "win32" });
  assert.deepEqual(win.map((c) => c.path), ["C:\\ext\\bin\\ghostline.exe", "C:\\tools\\ghostline.exe", "D:\\bin\\ghostline.exe"]);
});

test("parseVersion accepts ghostline's --version and nothing else", () => {
  assert.equal(parseVersion("ghostline 0.1.0\n"), "0.1.0");
  assert.equal(parseVersion("other-tool 1.0\n"), undefined);
  assert.equal(parseVersion(""), undefined);
});

test("real files: the bundled binary wins over PATH; a non-ghostline binary on PATH is skipped", async () => {
  const root = mkdtempSync(join(tmpdir(), "ghostline-locate-"));
  const ext = join(root, "ext");
  script(join(ext, "bin"), "ghostline", 'echo "ghostline 9.9.9"');
  script(join(root, "p1"), "ghostline", 'echo "something else 1.0"');
  script(join(root, "p2"), "ghostline", 'echo "ghostline 0.1.0"');
  const pathEnv = `${join(root, "p1")}:${join(root, "p2")}`;

  const bundled = await locateServer({ extensionDir: ext, pathEnv, platform: "linux" }, probe);
  assert.deepEqual(bundled, { path: join(ext, "bin", "ghostline"), version: "9.9.9", source: "bundled" });

  const fromPath = await locateServer({ extensionDir: join(root, "no-ext"), pathEnv, platform: "linux" }, probe);
  assert.deepEqual(fromPath, { path: join(root, "p2", "ghostline"), version: "0.1.0", source: "PATH" });
});

test("a configured path is used, and a broken one is an error rather than a silent fallback", async () => {
  const root = mkdtempSync(join(tmpdir(), "ghostline-locate-"));
  const good = script(join(root, "custom"), "gl", 'echo "ghostline 1.2.3"');
  const failing = script(join(root, "custom"), "broken", "exit 3");
  script(join(root, "ext", "bin"), "ghostline", 'echo "ghostline 9.9.9"');

  const found = await locateServer({ configured: good, extensionDir: join(root, "ext"), platform: "linux" }, probe);
  assert.deepEqual(found, { path: good, version: "1.2.3", source: "setting" });

  await assert.rejects(
    locateServer({ configured: failing, extensionDir: join(root, "ext"), platform: "linux" }, probe),
    /ghostline\.server\.path = .*broken/,
  );
  await assert.rejects(
    locateServer({ configured: join(root, "missing"), extensionDir: join(root, "ext"), platform: "linux" }, probe),
    /ghostline\.server\.path/,
  );
});

test("nothing found: the error says what to do and what was tried", async () => {
  const root = mkdtempSync(join(tmpdir(), "ghostline-locate-"));
  await assert.rejects(
    locateServer({ extensionDir: join(root, "ext"), pathEnv: join(root, "empty"), platform: "linux" }, probe),
    (error: Error) => {
      assert.match(error.message, /set ghostline\.server\.path/);
      assert.match(error.message, /ext\/bin\/ghostline/);
      return true;
    },
  );
});
