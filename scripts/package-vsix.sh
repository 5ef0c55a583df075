#!/usr/bin/env bash
# Packages the VS Code extension with the ghostline server inside, for one platform: a
# platform-specific .vsix (`vsce package --target`), so that installing the extension is the
# whole install there. The extension finds the bundled binary (bin/ghostline, bin/ghostline.exe
# on Windows) before `ghostline` on PATH; `ghostline.server.path` still wins when set.
#
#   scripts/package-vsix.sh TARGET [BINARY]   → editors/vscode/ghostline-TARGET.vsix
#
# BINARY defaults to target/release/ghostline (`cargo build --release`), which must be built
# for TARGET: a .vsix carries a binary for one platform only. The targets and where to build:
#   linux-x64      cargo build --release on x86-64 Linux; scripts/package-vsix.sh linux-x64
#   linux-arm64    GGML_LLAMAFILE=OFF cargo build --release on arm64 Linux;  scripts/package-vsix.sh linux-arm64
#   darwin-arm64   GGML_LLAMAFILE=OFF cargo build --release on Apple silicon (Metal); scripts/package-vsix.sh darwin-arm64
#   darwin-x64     GGML_LLAMAFILE=OFF cargo build --release on an Intel Mac;  scripts/package-vsix.sh darwin-x64
#   win32-x64      set GGML_LLAMAFILE=OFF, then cargo build --release on Windows (MSVC); bash scripts/package-vsix.sh win32-x64 target/release/ghostline.exe
# (GGML_LLAMAFILE=OFF: llamafile's matrix product is made batch-invariant on x86-64 Linux only,
# by server/build.rs; elsewhere it is left out so that the CPU keeps batch-invariant kernels.)
# The plain .vsix without a binary (`npm run package` in editors/vscode) stays: it uses the
# `ghostline` on PATH or ghostline.server.path.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:?usage: scripts/package-vsix.sh TARGET [BINARY]}
case "$target" in
  linux-x64 | linux-arm64 | darwin-arm64 | darwin-x64) exe=ghostline ;;
  win32-x64 | win32-arm64) exe=ghostline.exe ;;
  *) echo "package-vsix.sh: unknown target $target (linux-x64, linux-arm64, darwin-arm64, darwin-x64, win32-x64)" >&2; exit 2 ;;
esac
binary=${2:-target/release/$exe}
[ -x "$binary" ] || { echo "package-vsix.sh: no server binary at $binary (cargo build --release)" >&2; exit 1; }
"$binary" --version | grep -q '^ghostline ' || { echo "package-vsix.sh: $binary is not ghostline" >&2; exit 1; }
binary=$(realpath "$binary")

cd editors/vscode
rm -rf bin
mkdir -p bin
trap 'rm -rf bin' EXIT
cp "$binary" "bin/$exe"
# The release build keeps its symbols: the packaged copy needs none of them (Linux; a macOS
# binary keeps its signature untouched).
case "$target" in linux-*) strip "bin/$exe" ;; esac
chmod 755 "bin/$exe"
npm run --silent build -- --production
npx vsce package --target "$target" --no-dependencies --allow-missing-repository --skip-license \
  --out "ghostline-$target.vsix" >&2
echo "editors/vscode/ghostline-$target.vsix"
