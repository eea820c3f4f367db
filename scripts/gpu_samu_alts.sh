#!/usr/bin/env bash
# Same-call comparisons of builds on the GPU machine: for each TAG, the binaries in .bundle/alt_TAG (server,
# worker and client, gzipped on this side: ALT_ONLY=1 bash scripts/gpu_samu_alts.sh TAG only installs them)
# replace the bundle's, then one samu round (scripts/gpu_samu_round.sh TAG, V_A / V_B as it takes them). The
# GPU suites matching TESTS_RE run once, with the first TAG, into $OUT/gpu_tests_TAG.log.
#   device.run carry=[".bundle"] command="V_A=... V_B=... bash scripts/gpu_samu_alts.sh main new"
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}
install_alt() {
  local b
  for b in server/scantuned worker/scantune-worker client/scantune; do
    gzip -dc ".bundle/alt_$1/$(basename $b).gz" > ".bundle/build/$b"
  done
}
if [ "${ALT_ONLY:-0}" = 1 ]; then install_alt "$1"; exit; fi
first=1
for tag in "$@"; do
  install_alt "$tag"
  if [ $first = 1 ] && [ -n "${TESTS_RE:-}" ]; then skip=0; else skip=1; fi
  first=0
  SKIP_TESTS=$skip bash scripts/gpu_samu_round.sh "$tag"
  [ -f "$out/tests/gpu_tests.log" ] && cp "$out/tests/gpu_tests.log" "$out/gpu_tests_$tag.log"
  rm -rf "$out/${tag}_a" "$out/${tag}_b" "$out/tests"
done
