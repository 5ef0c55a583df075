#!/usr/bin/env bash
# Builds the Helix editor (`hx`) from the source snapshot in ../shared/vendor/helix/ (beside the
# repository; Helix 25.07.1, every dependency from crates.io) into the cache when it is missing,
# and prints the path of `hx`. Its `runtime/` folder (themes, queries, the default
# languages.toml) lies beside it, where `hx` looks for it. Used by the real-Helix test
# (editors/helix/test/, run by scripts/test-editors.sh).
#
# Cached by the tarball's SHA-256, so a new snapshot builds afresh. Helix's own target folder
# (not ghostline's) lives in the cache while it builds and is removed once `hx` is copied out.
# No tree-sitter grammars are built (that would fetch them from the network): Helix then has no
# syntax highlighting but detects languages and runs language servers normally. ~5 minutes on
# 2 idle cores the first time; later calls only print the path.
#
#   GHOSTLINE_CACHE          cache folder (default: ~/.cache/ghostline)
#   GHOSTLINE_HELIX_SOURCE   the snapshot tarball (default: ../shared/vendor/helix/helix-*.tar.xz)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

tarball="${GHOSTLINE_HELIX_SOURCE:-}"
if [ -z "$tarball" ]; then
  tarball=$(ls ../shared/vendor/helix/helix-*.tar.xz 2>/dev/null | sort | tail -1 || true)
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
  echo "helix.sh: no Helix source snapshot at ${tarball:-../shared/vendor/helix/helix-*.tar.xz (beside the repository)}" >&2
  exit 1
fi
hash=$(sha256sum "$tarball" | cut -c1-16)
dir="$GHOSTLINE_CACHE/helix/$hash"
hx="$dir/bin/hx"

installed() { [ -f "$dir/.complete" ] && [ -x "$hx" ] && [ -d "$dir/bin/runtime/queries" ]; }

if ! installed; then
  mkdir -p "$GHOSTLINE_CACHE/helix"
  # One build at a time: a second caller waits for the first and then finds it built.
  exec 9>"$GHOSTLINE_CACHE/helix/build.lock"
  flock 9
  if ! installed; then
    started=$(date +%s)
    echo "building Helix from $(basename "$tarball") (~5 minutes on 2 idle cores)..." >&2
    rm -rf "$dir/src" "$dir/bin" "$dir/.complete"
    mkdir -p "$dir/src" "$dir/bin"
    tar xJf "$tarball" -C "$dir/src" --strip-components=1
    (
      cd "$dir/src"
      # rust-toolchain.toml pins a toolchain that is not installed: build with the stable one.
      # The target folder is kept between failed attempts (it is Helix's own, in the cache).
      RUSTUP_TOOLCHAIN=stable HELIX_DISABLE_AUTO_GRAMMAR_BUILD=1 CARGO_TARGET_DIR="$dir/target" \
        cargo build --release --locked --quiet --bin hx >&2
    )
    cp "$dir/target/release/hx" "$hx"
    cp -r "$dir/src/runtime" "$dir/bin/runtime"
    "$hx" --version >&2
    rm -rf "$dir/target" "$dir/src"
    touch "$dir/.complete"
    echo "Helix built in $(( $(date +%s) - started )) s" >&2
  fi
  flock -u 9
fi

echo "$hx"
