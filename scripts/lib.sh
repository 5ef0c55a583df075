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
