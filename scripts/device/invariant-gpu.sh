#!/usr/bin/env bash
# Runs ON the CUDA machine after build.sh (whose sources get batch-invariant.patch), with
# .device/smol-b carried (see scripts/device/README.md). In one call, each step bounded in time:
#   1. `bench --batch-invariance` (invariance.sh) with the patch's kernels on and off, SmolLM2;
#   2. `bench --warm-cold` on every trace with the patch's kernels (ghostline's default then:
#      no aligned prefill, the whole common prefix kept, drafting gated by what it costs);
#   3. cold prompts and the keystroke traces without a debounce against llama-server (llama.cpp's
#      own kernels), ghostline with the patch's kernels and then with llama.cpp's own
#      (GGML_CUDA_BATCH_INVARIANT=0: ghostline then keeps the aligned prefill of 8).
# A step's kernels are `patched` (the patch's defaults), `stock`, or
# `jN`: the patch's kernels with GGML_CUDA_BATCH_INVARIANT_J=N (N = 8 … 128: MMQ at that width;
# 0: MMVQ in groups of 4 columns), or any NAME for which ENV_NAME holds the variables, e.g.
# ENV_nofuse="GGML_CUDA_DISABLE_FUSION=1" STEPS="sizes-j8 sizes-nofuse" (that one reaches the peer too).
# Writes everything under $OUT (or .device/out).
#
#   RUNS      trace replays per side (default 1)
#   INV_ENVS  the invariance step's variants (invariance.sh's ENVS; default: patched and stock)
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/common.sh
model="$(device_model smol)" || exit 1
export LD_LIBRARY_PATH="$d/build/bin"
server="$d/build/bin/llama-server"
peer=(--peer llama-server --peer-bin "$server" --peer-arg=-ngl --peer-arg=999)
runs="${RUNS:-1}"

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  nvcc --version | tail -2
  lscpu | grep -E "Model name|^CPU\(s\)"
  GHOSTLINE_MODEL="$model" "$ghostline" doctor 2>/dev/null | grep -i -E "backend|kernel|gpu|cuda|invariant|chunk" || true
  echo "with GGML_CUDA_BATCH_INVARIANT=0:"
  GGML_CUDA_BATCH_INVARIANT=0 GHOSTLINE_MODEL="$model" "$ghostline" doctor 2>/dev/null | grep -i -E "kernel|invariant|chunk" || true
} > "$out/conditions.txt" 2>&1

for what in ${STEPS:-invariance sizes-patched traces-patched sizes-stock warm-cold traces-stock}; do
  kernels="${what#*-}"
  env=()
  case "$kernels" in
    stock) env=(GGML_CUDA_BATCH_INVARIANT=0) ;;
    j[0-9]*) env=(GGML_CUDA_BATCH_INVARIANT_J="${kernels#j}") ;;
  esac
  named="ENV_$kernels"
  [ -z "${!named:-}" ] || read -r -a env <<< "${!named}"
  step "$what"
  case "$what" in
    invariance)
      ENVS="${INV_ENVS:-patched:;stock:GGML_CUDA_BATCH_INVARIANT=0}" timeout 150 scripts/device/invariance.sh gpu smol ;;
    warm-cold)
      for trace in fixtures/traces/*.json; do
        timeout 120 "$ghostline" bench --model "$model" --threads 8 --warm-cold --trace "$trace" \
          2>> "$out/warm-cold.log" | tee -a "$out/warm-cold.txt"
      done ;;
    sizes-*)
      timeout 100 env "${env[@]}" "$ghostline" bench --model "$model" --threads 8 --cold-sizes 256,1024,2048 --runs 3 "${peer[@]}" \
        --save "$out/sizes-$kernels.json" 2> "$out/sizes-$kernels.log" | tee "$out/sizes-$kernels.txt" ;;
    traces-*)
      timeout 200 env "${env[@]}" "$ghostline" bench --model "$model" --threads 8 --runs "$runs" "${peer[@]}" --no-debounce \
        --save "$out/traces-no-debounce-$kernels.json" 2> "$out/traces-no-debounce-$kernels.log" | tee "$out/traces-no-debounce-$kernels.txt" ;;
    *) echo "unknown step $what" ;;
  esac
done
step "done"
