#!/usr/bin/env bash
# SASS of named variants without a GPU: NVRTC compiles them (scantune_nvrtc_dump),
# cuobjdump and nvdisasm (NVIDIA's PyPI wheels, fetched once into .sass-tools/, ignored)
# disassembles them, and each kernel's instruction counts are printed: all
# instructions, MUFU, shared and global memory, barriers and branches.
#   bash scripts/sass_counts.sh OP DTYPE VARIANT...        e.g. samu bf16 chunked_v8_t256_c32_l64_y1
# The SASS files stay in ${SASS_OUT:-/tmp/scantune-sass} for reading.
# Static counts: a loop body counts once. Where time goes needs the GPU (ncu).
# One group of samu's rescan on its common path: scripts/sass_rescan_path.py FILE.sass.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
op=$1 dtype=$2
shift 2
tools=$PWD/.sass-tools
cuobjdump=$tools/nvidia/cu13/bin/cuobjdump
if [ ! -x "$cuobjdump" ]; then
  mkdir -p "$tools/wheels"
  python3 -m pip download --quiet --no-deps -d "$tools/wheels" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
  for wheel in "$tools"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$tools"; done
  chmod +x "$cuobjdump" "$tools/nvidia/cu13/bin/nvdisasm"
fi
[ -x build/tests/compiler/scantune_nvrtc_dump ] || cmake --build build --target scantune_nvrtc_dump
out=${SASS_OUT:-/tmp/scantune-sass}
mkdir -p "$out"
SCANTUNE_OP=$op build/tests/compiler/scantune_nvrtc_dump "$out" "$dtype" "$@" >/dev/null
for variant in "$@"; do
  cubin=$out/${variant}_${dtype}.cubin
  PATH=$tools/nvidia/cu13/bin:$PATH "$cuobjdump" -sass "$cubin" >"$out/${variant}_${dtype}.sass"
  echo "== $op $dtype $variant ($out/${variant}_${dtype}.sass)"
  python3 - "$out/${variant}_${dtype}.sass" <<'EOF'
import re, sys
counts, kernel = {}, None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"Function : (\S+)", line)
    if m:
        kernel = m.group(1)
        counts[kernel] = {"all": 0, "MUFU": 0, "LDS/STS": 0, "LDG/STG": 0, "LDGSTS": 0, "BAR": 0, "BRA": 0}
        continue
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    if not m or kernel is None:
        continue
    op = m.group(2).split(".")[0]
    if op == "NOP":
        continue
    c = counts[kernel]
    c["all"] += 1
    if op == "MUFU": c["MUFU"] += 1
    elif op in ("LDS", "STS", "LDSM"): c["LDS/STS"] += 1
    elif op in ("LDG", "STG", "RED", "ATOMG"): c["LDG/STG"] += 1
    elif op == "LDGSTS": c["LDGSTS"] += 1
    elif op == "BAR": c["BAR"] += 1
    elif op in ("BRA", "BRX", "JMP"): c["BRA"] += 1
names = list(next(iter(counts.values())).keys()) if counts else []
print("  " + "  ".join(f"{n:>8}" for n in names) + "  kernel")
for kernel, c in counts.items():
    print("  " + "  ".join(f"{c[n]:>8}" for n in names) + "  " + kernel)
EOF
done
