// Bundles the extension (dist/extension.js, `vscode` left external) and, with --tests, the unit
// tests (out/test/*.test.js, runnable by node's test runner without VS Code).
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";

const args = new Set(process.argv.slice(2));
const production = args.has("--production");

if (args.has("--tests")) {
  const tests = readdirSync("test").filter((f) => f.endsWith(".test.ts")).map((f) => `test/${f}`);
  await esbuild.build({
    entryPoints: tests,
    outdir: "out/test",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: "inline",
    external: ["vscode"],
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
