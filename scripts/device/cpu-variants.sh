#!/usr/bin/env bash
# Runs ON the lent machine after build.sh (see scripts/device/README.md): measures what the CPU
# kernels cost, with no GPU. Builds llama.cpp's shared libraries twice from the same sources,
# CPU only: once with the kernels ghostline's crate build uses everywhere (GGML_NATIVE=OFF,
# AVX/AVX2/BMI2/FMA/F16C) and once for this CPU (GGML_NATIVE=ON: AVX-512, AMX, VNNI where it has
# them); then runs `ghostline bench --cold-sizes` (prefill and decode rates, the floor) on each,
# the binary being the same: the libraries are swapped with LD_LIBRARY_PATH.
#
#   cpu-variants.sh smol|gemma [THREADS]     (the model as bench.sh assembles it)
#
#   BUILD_ONLY=1       build the two library sets and stop (no model needed yet)
#   CHUNKS="4 32"      also, on the AVX2 libraries with 2 threads, at each `model.prefillChunk`:
#                      replay the inventory trace with a request right after each key, and time
#                      cold prompts (what the aligned prefill costs per keystroke and cold; no peer)
set -euo pipefail
cd "$(dirname "$0")/../.."
d=.device
which="${1:?smol or gemma}"
threads="${2:-8}"
out="${OUT:-$d/out}"
mkdir -p "$out"
case "$which" in
  smol) model="$d/models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
  gemma) model="$d/models/gemma-3-270m-q4_k_m.gguf" ;;
  *) echo "unknown model $which" >&2; exit 2 ;;
esac
[ -d "$d/src/llama.cpp" ] || { echo "no sources: run build.sh first" >&2; exit 1; }
{ lscpu | grep -E "Model name|^CPU\(s\)"; grep -o -w 'avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' '; echo; } | tee "$out/cpu-$which-conditions.txt"
common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_CUDA=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF)
declare -A flags=(
  [avx2]="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  [native]="-DGGML_NATIVE=ON"
)
for v in avx2 native; do
  b="$d/cpu-$v"
  # shellcheck disable=SC2086
  [ -f "$b/build.ninja" ] || cmake -S "$d/src/llama.cpp" -B "$b" -G Ninja "${common[@]}" ${flags[$v]} > "$out/cpu-$v-cmake.log"
  started=$(date +%s)
  cmake --build "$b" -j"$(nproc)" --target llama > "$out/cpu-$v-build.log"
  echo "$v: built in $(( $(date +%s) - started )) s"
done
[ "${BUILD_ONLY:-0}" != 1 ] || exit 0
[ -f "$model" ] || { echo "no $model: run bench.sh $which first" >&2; exit 1; }
for c in ${CHUNKS:-}; do
  echo "== avx2, 2 threads, no debounce, prefillChunk $c" | tee -a "$out/cpu-$which-chunks.txt"
  LD_LIBRARY_PATH="$d/cpu-avx2/bin" "$d/bin/ghostline" bench --model "$model" --threads 2 --runs 1 \
    --trace fixtures/traces/inventory.json --no-debounce --prefill-chunk "$c" \
    2>> "$out/cpu-$which.log" | tee -a "$out/cpu-$which-chunks.txt"
  LD_LIBRARY_PATH="$d/cpu-avx2/bin" "$d/bin/ghostline" bench --model "$model" --threads 2 --runs 3 \
    --cold-sizes 256,1024 --prefill-chunk "$c" 2>> "$out/cpu-$which.log" | tee -a "$out/cpu-$which-chunks.txt"
done
for v in avx2 native avx2 native; do
  echo "== $v" | tee -a "$out/cpu-$which.txt"
  LD_LIBRARY_PATH="$d/cpu-$v/bin" GHOSTLINE_MODEL="$model" "$d/bin/ghostline" doctor 2>/dev/null | grep -i -A1 kernels | tee -a "$out/cpu-$which.txt" || true
  LD_LIBRARY_PATH="$d/cpu-$v/bin" "$d/bin/ghostline" bench --model "$model" --threads "$threads" \
    --cold-sizes 256,1024 --runs 5 2>> "$out/cpu-$which.log" | tee -a "$out/cpu-$which.txt"
done
