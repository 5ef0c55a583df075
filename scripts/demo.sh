#!/usr/bin/env bash
# The main job: builds ghostline, fetches the small default model if missing, and runs the
# real language server over stdio through a scripted typing session, printing each
# suggestion with its latency. `--model fim` runs it on the FIM test model (the suffix is in
# the prompt).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# Before the model and the build: a missing cmake or libclang would otherwise end a long build
# in a bindgen panic.
ensure_build_prerequisites
# --model fim (or smollm2, gemma3): that test model, through scripts/fetch-model.sh; --model
# PATH: that file; none: $GHOSTLINE_MODEL, else the default test model (prefix-only: no FIM).
model="${GHOSTLINE_MODEL:-}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="${2:?--model needs fim, smollm2, gemma3 or a GGUF path}"; shift 2 ;;
    --model=*) model="${1#--model=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$model" in
  fim | smollm2 | gemma3) model="$(scripts/fetch-model.sh "$model")" ;;
  "") model="$(scripts/fetch-model.sh)" ;;
esac
cargo build --release --quiet
exec target/release/ghostline demo --model "$model" "${args[@]}"
