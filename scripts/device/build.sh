#!/usr/bin/env bash
# Runs ON the CUDA machine (see scripts/device/README.md): builds llama.cpp's shared libraries
# with the CUDA backend, and llama-server, from .device/base/llama-src.tar.xz into
# .device/build, for Hopper (sm_90; CUDA_ARCHITECTURES overrides). Resumable: a second
# call continues an interrupted build. TARGETS (default "llama llama-server") narrows it: the soak
# needs only "llama".
set -euo pipefail
cd "$(dirname "$0")/../.."
d=.device
if [ ! -d "$d/src/llama.cpp" ]; then
  mkdir -p "$d/src"
  tar xJf "$d/base/llama-src.tar.xz" -C "$d/src"
fi
if [ ! -f "$d/build/build.ninja" ]; then
  cmake -S "$d/src/llama.cpp" -B "$d/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90}" -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
fi
started=$(date +%s)
# shellcheck disable=SC2086
cmake --build "$d/build" -j"$(nproc)" --target ${TARGETS:-llama llama-server}
echo "build: $(( $(date +%s) - started )) s"
[ -f "$d/bin/ghostline" ] || { mkdir -p "$d/bin" && xz -dc "$d/base/ghostline.xz" > "$d/bin/ghostline" && chmod +x "$d/bin/ghostline"; }
LD_LIBRARY_PATH="$d/build/bin" "$d/bin/ghostline" --version
[ ! -x "$d/build/bin/llama-server" ] || LD_LIBRARY_PATH="$d/build/bin" "$d/build/bin/llama-server" --version 2>&1 | tail -3
