#!/usr/bin/env bash
# Runs ON the CUDA machine (see scripts/device/README.md): builds llama.cpp's shared libraries
# with the CUDA backend, and llama-server, from .device/base/llama-src.tar.xz into
# .device/build, for Hopper (sm_90; CUDA_ARCHITECTURES overrides). Resumable: a second
# call continues an interrupted build. TARGETS (default "llama llama-server") narrows it: the soak
# needs only "llama" (`invariance.sh` "llama llama-quantize"). BUILD (default .device/build) and
# EXTRA_CMAKE (more -D options, e.g. -DGGML_CUDA_FORCE_CUBLAS=ON) make a second, other build.
# The CUDA backend builds from a copy patched with server/cuda/batch-invariant.patch (off unless
# GGML_CUDA_BATCH_INVARIANT=1), by server/cuda/batch-invariant.cmake: the cargo `cuda` build's way.
#
# The CPU backend is built without llamafile's sgemm and the repacked weights: both take another
# code path for a batch than for one token, and in these shared libraries no link option can
# route the sgemm calls through `model::sgemm` as ghostline's static x86-64 Linux build does.
# GGML_NATIVE stays on (this machine's AVX-512 and AMX kernels; cpu-variants.sh builds the crate's
# AVX2 ones apart): with every layer on the GPU the CPU only looks up the prompt's embedding rows,
# one row at a time, the same in any batch.
set -euo pipefail
cd "$(dirname "$0")/../.."
d=.device
if [ ! -d "$d/src/llama.cpp" ]; then
  mkdir -p "$d/src"
  tar xJf "$d/base/llama-src.tar.xz" -C "$d/src"
fi
build="${BUILD:-$d/build}"
if [ ! -f "$build/build.ninja" ]; then
  # CMAKE_PROJECT_INCLUDE: ghostline's batch-invariant CUDA kernels, switched on at run time by
  # GGML_CUDA_BATCH_INVARIANT=1 (ghostline sets it; llama-server, the peer, runs without it:
  # llama.cpp's own kernels).
  # shellcheck disable=SC2086
  cmake -S "$d/src/llama.cpp" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90}" -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_LLAMAFILE=OFF -DGGML_CPU_REPACK=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON ${EXTRA_CMAKE:-} \
    -DCMAKE_PROJECT_INCLUDE="$PWD/server/cuda/batch-invariant.cmake"
fi
started=$(date +%s)
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target ${TARGETS:-llama llama-server}
echo "build: $(( $(date +%s) - started )) s"
[ -f "$d/bin/ghostline" ] || { mkdir -p "$d/bin" && xz -dc "$d/base/ghostline.xz" > "$d/bin/ghostline" && chmod +x "$d/bin/ghostline"; }
LD_LIBRARY_PATH="$build/bin" "$d/bin/ghostline" --version
[ ! -x "$build/bin/llama-server" ] || LD_LIBRARY_PATH="$build/bin" "$build/bin/llama-server" --version 2>&1 | tail -3
