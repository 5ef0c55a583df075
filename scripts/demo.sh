#!/usr/bin/env bash
# The main job: builds ghostline, fetches the small default model if missing, and runs the
# real language server over stdio through a scripted typing session, printing each
# suggestion with its latency.
set -euo pipefail
cd "$(dirname "$0")/.."
model="${GHOSTLINE_MODEL:-$(scripts/fetch-model.sh)}"
cargo build --release --quiet
exec target/release/ghostline demo --model "$model" "$@"
