# Sourced by the device scripts, from the repository root: `d` (.device), `out` (where results
# go: $OUT, else .device/out; made), `ghostline` (the binary build.sh unpacked), `step` (a timed
# line in the output and in $out/steps.txt), and `device_model NAME`, which joins the pieces of a
# test model that the calls carried into .device/ (see prepare.sh), checks its sha256 and prints
# its path (NAME: smol, fim or gemma).
d=.device
out="${OUT:-$d/out}"
mkdir -p "$out"
ghostline="$PWD/$d/bin/ghostline"
step() { echo "== $(date -u +%T) $*" | tee -a "$out/steps.txt"; }

device_model() {
  local m sum
  mkdir -p "$d/models"
  case "$1" in
    smol)
      m="$d/models/SmolLM2-135M-Instruct.Q4_1.gguf"
      sum=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
      [ -f "$m" ] || cat "$d"/base/smol.part-* "$d"/smol-b/smol.part-* > "$m" ;;
    fim)
      m="$d/models/ghostline-test-fim-135m.Q4_1.gguf"
      sum=360b4deb2d23fac98abf08914579915ad291d7242b19f89a0447b671576ad512
      # Its pieces travel in two folders (fim-1: aa, ac; fim-2: ab): joined in their names' order.
      [ -f "$m" ] || ls "$d"/fim-*/fim.part-* | awk -F/ '{ print $NF, $0 }' | sort | cut -d' ' -f2 | xargs cat > "$m" ;;
    gemma)
      m="$d/models/gemma-3-270m-q4_k_m.gguf"
      sum=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
      if [ ! -f "$m" ]; then
        for n in 1 2 3 4; do
          python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    part = [n for n in z.namelist() if ".gguf.part" in n][0]
    sys.stdout.buffer.write(z.read(part))' "$d"/gemma-$n/*.whl
        done > "$m"
      fi ;;
    *) echo "unknown model $1" >&2; return 2 ;;
  esac
  echo "$sum  $m" | sha256sum --check >&2 || return 1
  echo "$m"
}
