#!/usr/bin/env bash
# Runs ON the CUDA machine after `TARGETS=llama build.sh`, with .device/smol-b carried (see
# scripts/device/README.md): the shared model host (issue 32) where every layer is on the GPU.
#   1. scripts/shared-memory.py: 1, 2 and 3 windows, each its own model vs one host — resident
#      memory, the GPU memory they add, and whether every window answered the same text;
#   2. scripts/shared-latency.py: window A's keystroke latency alone and while window B types,
#      each its own model vs one host, and whether A's answers agree across the four runs.
# Each at THREADS threads (default 8), each bounded in time. Writes under $OUT (or .device/out).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/common.sh
model="$(device_model smol)" || exit 1
export LD_LIBRARY_PATH="$PWD/$d/build/bin"
model="$PWD/$model"
threads="${THREADS:-8}"

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)"
  GHOSTLINE_MODEL="$model" "$ghostline" doctor 2>/dev/null | grep -i -E "backend|gpu|cuda|invariant|shared|host" || true
} > "$out/conditions.txt" 2>&1

for what in ${STEPS:-memory latency}; do
  step "$what"
  case "$what" in
    memory) timeout 240 python3 scripts/shared-memory.py "$ghostline" "$model" "$threads" 2>&1 | tee "$out/shared-memory.txt" ;;
    latency) timeout 300 python3 scripts/shared-latency.py "$ghostline" "$model" "$threads" 2>&1 | tee "$out/shared-latency.txt" ;;
    *) echo "unknown step $what" ;;
  esac
done
# What the hosts logged (no document text unless debug.logCode is on).
cat /tmp/ghostline-mem-*/cache/ghostline/host-*.log /tmp/ghostline-lat-*/cache/ghostline/host-*.log > "$out/host-logs.txt" 2>/dev/null
step "done"
