#!/usr/bin/env bash
# The main job: builds ghostline, fetches the small default model if missing, and runs the
# real language server over stdio through a scripted typing session, printing each
# suggestion with its latency.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# Before the model and the build: a missing cmake or libclang would otherwise end a long build
# in a bindgen panic.
ensure_build_prerequisites
model="${GHOSTLINE_MODEL:-$(scripts/fetch-model.sh)}"
cargo build --release --quiet
exec target/release/ghostline demo --model "$model" "$@"
