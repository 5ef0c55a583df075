#!/usr/bin/env bash
# The cross-file evaluation on real third-party projects: downloads the source distributions of
# a few Python packages (pinned; nobody here wrote them), unpacks them into the cache once, and
# runs `ghostline eval --cross-file` on their packages, with the cross-file section and without.
#
#   scripts/eval-cross-file.sh [--holes N] [--seed S] [--json] [--model M.gguf]
#
# Extra arguments go to `ghostline eval`. Uses target/release/ghostline (built if missing) and
# the test model (scripts/fetch-model.sh) unless --model or $GHOSTLINE_MODEL says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

projects="$GHOSTLINE_CACHE/eval-projects"
packages=(click==8.1.7 requests==2.32.3 flask==3.0.3 jinja2==3.1.4)
mkdir -p "$projects/sdists"
for spec in "${packages[@]}"; do
  name="${spec%%==*}"
  version="${spec##*==}"
  if [ ! -d "$projects/$name-$version" ]; then
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: "$spec" -d "$projects/sdists" >&2
    tar xzf "$projects/sdists/$name-$version.tar.gz" -C "$projects"
  fi
done

[ -x target/release/ghostline ] || cargo build --release --quiet >&2
model="${GHOSTLINE_MODEL:-$(scripts/fetch-model.sh)}"
sources=()
for spec in "${packages[@]}"; do
  sources+=(--source "$projects/${spec%%==*}-${spec##*==}/src")
done
GHOSTLINE_MODEL="$model" target/release/ghostline eval --cross-file "${sources[@]}" "$@"
