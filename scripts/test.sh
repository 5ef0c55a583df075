#!/usr/bin/env bash
# Runs every test: unit tests and end-to-end tests against the real test model (release build,
# since llama.cpp unoptimised is unusably slow). Fetches the models and makes the FIM wiring
# model first when they are missing; the FIM test model must be in ../shared/models/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_build_prerequisites   # before anything is fetched or built

export GHOSTLINE_MODEL
GHOSTLINE_MODEL="$(scripts/fetch-model.sh)"
# The second test model (Gemma 3 270M): the warm-equals-cold replay runs on both.
export GHOSTLINE_SECOND_MODEL
GHOSTLINE_SECOND_MODEL="$(scripts/fetch-model.sh gemma3)"
# The FIM test model (shared/models/, beside the repository): missing, the run stops here with
# where it is expected.
export GHOSTLINE_FIM_MODEL
GHOSTLINE_FIM_MODEL="$(scripts/fetch-model.sh fim)"

# FIM wiring model: the test model with FIM tokens declared in its metadata (see the script).
fim="$GHOSTLINE_CACHE/models/SmolLM2-135M-Instruct.fim-wiring.gguf"
if [ ! -f "$fim" ] || [ "$fim" -ot scripts/make-fim-wiring-model.py ]; then
  ensure_python_packages gguf==0.19.0
  "$VENV/bin/python" scripts/make-fim-wiring-model.py "$GHOSTLINE_MODEL" "$fim.tmp"
  mv "$fim.tmp" "$fim"
fi
export GHOSTLINE_FIM_WIRING_MODEL="$fim"

# Python with the gguf package: tests check ghostline's GGUF reader and memory arithmetic
# against the figures gguf computes from the same files.
ensure_python_packages gguf==0.19.0
export GHOSTLINE_PYTHON="$VENV/bin/python"

GHOSTLINE_LLAMA_SERVER="${GHOSTLINE_LLAMA_SERVER:-$(scripts/llama-server.sh)}"; export GHOSTLINE_LLAMA_SERVER  # the bench's peer (built once into the venv: ~20 min on 2 cores)
cargo test --release --workspace "$@"
# Offline for real: the LSP end-to-end tests and the no-socket test once more, inside a network
# namespace that has no interface up.
unshare -n -- cargo test --release --offline --test lsp_e2e --test offline
GHOSTLINE_CARGO_TESTS_DONE=1 scripts/test-editors.sh   # editors with real clients (Helix ran above with cargo test)
