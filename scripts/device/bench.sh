#!/usr/bin/env bash
# Runs ON the CUDA machine after build.sh (see scripts/device/README.md): assembles a model from
# the pieces carried so far, checks its sha256, and runs `ghostline bench` with every layer on
# the GPU, side by side with llama-server built from the same llama.cpp sources:
#   - cold prompts of 256, 1,024 and 2,048 tokens (TTFT, prefill and decode rates, the floor);
#   - the typing traces in fixtures/traces (keystroke-to-suggestion latency).
# Writes the tables, the JSON reports and the chart under $OUT (or .device/out).
#
#   bench.sh smol|gemma [RUNS]
#   bench.sh smol soak N      the soak instead: N completions through one server, memory sampled
#
#   SIZES=0        skip the cold prompts
#   TRACES=0       skip the trace replay with the editor's debounce
#   NO_AHEAD=1     also replay the traces with generating ahead off (`--no-ahead`): the engines
#                  compared request for request
#   NO_DEBOUNCE=1  also replay the traces with a request right after each key (`--no-debounce`)
#   PREFILL_CHUNK=N  the trace replays run with `--prefill-chunk N` (default: ghostline's)
#   WARM_COLD="32 4"  also run `bench --warm-cold` on every trace at each of these
#                  `model.prefillChunk` values (warm answers against cold processes', every request)
set -euo pipefail
cd "$(dirname "$0")/../.."
which="${1:?smol or gemma}"
runs="${2:-3}"
soak="${3:-}"
. scripts/device/common.sh
case "$which" in
  smol | gemma) model="$(device_model "$which")" ;;
  *) echo "unknown model $which" >&2; exit 2 ;;
esac

export LD_LIBRARY_PATH="$d/build/bin"
server="$d/build/bin/llama-server"
if [ "$runs" = soak ]; then
  "$ghostline" bench --model "$model" --threads 8 --soak "${soak:?soak needs N}" --json \
    > "$out/$which-soak.json" 2> "$out/$which-soak.log" || echo "soak exited with $?"
  python3 - "$out/$which-soak.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print({k: v for k, v in r.items() if not isinstance(v, (list, dict))})
PY
  exit 0
fi
peer=(--peer llama-server --peer-bin "$server" --peer-arg=-ngl --peer-arg=999)
chunk=()
[ -z "${PREFILL_CHUNK:-}" ] || chunk=(--prefill-chunk "$PREFILL_CHUNK")
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  nvcc --version | tail -2
  lscpu | grep -E "Model name|^CPU\(s\)"
  GHOSTLINE_MODEL="$model" "$ghostline" doctor 2>/dev/null || true
} > "$out/$which-conditions.txt" 2>&1
cat "$out/$which-conditions.txt"

if [ "${SIZES:-1}" != 0 ]; then
  "$ghostline" bench --model "$model" --threads 8 --cold-sizes 256,1024,2048 --runs 5 "${peer[@]}" \
    --save "$out/$which-sizes.json" 2> "$out/$which-sizes.log" | tee "$out/$which-sizes.txt"
fi
if [ "${TRACES:-1}" != 0 ]; then
  "$ghostline" bench --model "$model" --threads 8 --runs "$runs" "${peer[@]}" "${chunk[@]}" \
    --svg "$out/$which-traces.svg" --save "$out/$which-traces.json" 2> "$out/$which-traces.log" | tee "$out/$which-traces.txt"
fi
if [ "${NO_DEBOUNCE:-0}" = 1 ]; then
  "$ghostline" bench --model "$model" --threads 8 --runs "$runs" "${peer[@]}" "${chunk[@]}" --no-debounce \
    --save "$out/$which-traces-no-debounce.json" 2> "$out/$which-traces-no-debounce.log" | tee "$out/$which-traces-no-debounce.txt"
fi
if [ "${NO_AHEAD:-0}" = 1 ]; then
  "$ghostline" bench --model "$model" --threads 8 --runs "$runs" "${peer[@]}" "${chunk[@]}" --no-ahead \
    --save "$out/$which-traces-no-ahead.json" 2> "$out/$which-traces-no-ahead.log" | tee "$out/$which-traces-no-ahead.txt"
fi
for c in ${WARM_COLD:-}; do
  for trace in fixtures/traces/*.json; do
    name="$(basename "$trace" .json)"
    "$ghostline" bench --model "$model" --threads 8 --warm-cold --trace "$trace" --prefill-chunk "$c" \
      2>> "$out/$which-warm-cold.log" | tee -a "$out/$which-warm-cold.txt" || echo "warm-cold $name chunk $c: exit $?" | tee -a "$out/$which-warm-cold.txt"
  done
done
