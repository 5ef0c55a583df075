// Bundles the extension (dist/extension.js, `vscode` left external) and, with --tests, the unit
// tests (out/test/*.test.js, runnable by node's test runner without VS Code); with --e2e, the
// end-to-end test against the real server (out/e2e); with --browser, the real-VS-Code test
// (test/*.browser.ts → out/browser: code-server in headless Chromium, playwright-core external).
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";

const args = new Set(process.argv.slice(2));
const production = args.has("--production");

if (args.has("--tests") || args.has("--e2e") || args.has("--browser")) {
  // Unit tests (*.test.ts → out/test), the end-to-end test with the real server (*.e2e.ts →
  // out/e2e) or the test in a real VS Code (*.browser.ts → out/browser).
  const [suffix, outdir] = args.has("--browser")
    ? [".browser.ts", "out/browser"]
    : args.has("--e2e")
      ? [".e2e.ts", "out/e2e"]
      : [".test.ts", "out/test"];
  const tests = readdirSync("test").filter((f) => f.endsWith(suffix)).map((f) => `test/${f}`);
  await esbuild.build({
    entryPoints: tests,
    outdir,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: "inline",
    external: ["vscode", "playwright-core"],
    logLevel: "warning",
  });
} else {
  const options = {
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    external: ["vscode"],
    minify: production,
    sourcemap: !production,
    logLevel: "warning",
  };
  if (args.has("--watch")) {
    await (await esbuild.context(options)).watch();
  } else {
    await esbuild.build(options);
  }
}
