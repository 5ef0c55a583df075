# Shared by the scripts: cache folder and the Python tools' virtual environment.
# shellcheck shell=bash

GHOSTLINE_CACHE="${GHOSTLINE_CACHE:-$HOME/.cache/ghostline}"
VENV="$GHOSTLINE_CACHE/venv"

# ensure_python_packages SPEC... — installs pinned PyPI packages into the cached venv.
ensure_python_packages() {
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
  fi
  local missing=()
  for spec in "$@"; do
    "$VENV/bin/python" -m pip show --quiet "${spec%%==*}" >/dev/null 2>&1 || missing+=("$spec")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}" >&2
  fi
}

# ensure_build_prerequisites — what building ghostline needs and a fresh machine may lack: cargo,
# a C and C++ compiler, cmake (llama.cpp builds with it), libclang (bindgen generates the
# bindings with it) and patch (a CUDA build applies server/cuda/batch-invariant.patch with it;
# tests/cuda_patch.rs checks it applies). Missing apt packages are installed as .ci/run does
# when that needs no question (root, or sudo without a password); otherwise one line on stderr says what is
# missing and the one command that installs it, and the function returns 1 before anything is
# built. GHOSTLINE_NO_INSTALL=1 only checks (the tests use it).
ensure_build_prerequisites() {
  local pkgs=() missing=() sudo=
  command -v cmake >/dev/null 2>&1 || { pkgs+=(cmake); missing+=(cmake); }
  _have_libclang || { pkgs+=(libclang-dev); missing+=(libclang); }
  command -v patch >/dev/null 2>&1 || { pkgs+=(patch); missing+=(patch); }
  if ! { command -v cc || command -v gcc || command -v clang; } >/dev/null 2>&1 \
    || ! { command -v c++ || command -v g++ || command -v clang++; } >/dev/null 2>&1; then
    pkgs+=(build-essential); missing+=("a C/C++ compiler")
  fi
  if [ ${#pkgs[@]} -gt 0 ] && [ "${GHOSTLINE_NO_INSTALL:-}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      sudo=" "
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo="sudo"
    fi
    if [ -n "$sudo" ]; then
      echo "ghostline: installing ${pkgs[*]} (needed to build llama.cpp)" >&2
      # shellcheck disable=SC2086  # $sudo is empty or one word
      if $sudo apt-get update -qq >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2; then
        pkgs=(); missing=()
      fi
    fi
  fi
  local rust=
  command -v cargo >/dev/null 2>&1 || { missing+=(cargo); rust="Rust with rustup (https://rustup.rs)"; }
  [ ${#missing[@]} -eq 0 ] && return 0
  local how=()
  [ ${#pkgs[@]} -gt 0 ] && how+=("sudo apt-get install -y ${pkgs[*]}")
  [ -n "$rust" ] && how+=("$rust")
  local list joined
  list="$(printf '%s, ' "${missing[@]}")"
  joined="$(printf '%s; and ' "${how[@]}")"
  echo "ghostline cannot be built here: missing ${list%, }. Install: ${joined%; and }" >&2
  return 1
}

_have_libclang() {
  [ -n "${LIBCLANG_PATH:-}" ] && return 0
  command -v dpkg >/dev/null 2>&1 && dpkg -s libclang-dev >/dev/null 2>&1 && return 0
  # Read whole first: `grep -q` leaving early would fail the pipe under pipefail.
  local libs
  libs="$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true)"
  grep -q 'libclang[-.0-9]*\.so' <<<"$libs"
}
