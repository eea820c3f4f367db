#!/usr/bin/env bash
# One samu tuning round on the GPU machine, as the session rounds under bench/results run it: the GPU suites
# whose names match TESTS_RE (SKIP_TESTS=1 skips them), then samu bf16 fwd_bwd tuned over V_B at 1x8192x2560
# and over V_A at the other three seed-001 shapes, one tuning job per group. Writes $OUT/TAG_records.txt
# (variant state shape fwd bwd fwd_bwd [ms] rel_err) and $OUT/TAG_not_ok.txt (records not OK, with why).
#   V_A="a,b" V_B="c,d" TESTS_RE="EverySamu" bash scripts/gpu_samu_round.sh TAG
set -u
out=${OUT:-/tmp/out}
tag=${1:-new}
: "${V_A:?V_A: variants for 4x2048x2048, 1x32768x1024 and 1x32768x2048}" "${V_B:?V_B: variants for 1x8192x2560}"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  SCANTUNE_CTEST_REGEX="${TESTS_RE:-EverySamu}" OUT=$out/tests bash scripts/gpu_round.sh tests > /dev/null 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*" $out/tests/gpu_tests.log
fi
SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_SHAPES="1x8192x2560" SCANTUNE_VARIANTS="$V_B" \
  OUT=$out/${tag}_b bash scripts/gpu_round.sh tune > /dev/null 2>&1
SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_SHAPES="4x2048x2048 1x32768x1024 1x32768x2048" SCANTUNE_VARIANTS="$V_A" \
  OUT=$out/${tag}_a bash scripts/gpu_round.sh tune > /dev/null 2>&1
cat $out/${tag}_a/records_ok.txt $out/${tag}_b/records_ok.txt 2>/dev/null | grep samu | awk '{print $3, $4, $5, $8, $9, $10, $13}' \
  | sort -k3,3 -k6n > $out/${tag}_records.txt
python3 - $out/${tag}_?/records.json > $out/${tag}_not_ok.txt <<'PY'
import json, sys
for f in sys.argv[1:]:
    try:
        data = json.load(open(f))
    except Exception as e:
        print(f, e); continue
    recs = data if isinstance(data, list) else data.get("records", [])
    for r in recs:
        if r.get("state") not in ("OK", None):
            print(r.get("variant"), r.get("state"), r.get("shape"), str(r.get("error", r.get("message", "")))[:300])
PY
rm -f $out/${tag}_?/scantune-gpu.db
echo "== $tag (variant state shape fwd bwd fwd_bwd rel_err)"; cat $out/${tag}_records.txt; cat $out/${tag}_not_ok.txt
