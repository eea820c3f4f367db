#!/usr/bin/env bash
# Seed 004's Mamba selective-scan table on the GPU machine (see
# ../shared/DEVICE.md): starts scantuned from the carried bundle with a fresh
# database, then scantune-ssm-bench, which Tunes selective_scan (fp32, N = 16)
# at the 9 shapes x fwd / fwd_bwd through the daemon, measures
# rel_err_vs_scan, device_peak (fresh processes) and max_len, and prints the
# table beside seed 004's ordering, DEVICE.md's reference and the floor.
# Everything lands under $OUT:
#   ssm.json (seed 004's schema), ssm_table.txt, ssm_bench.log, scantuned.log,
#   devices.txt, gpu.txt, ssm_records.json (every stored record), scantune-ssm.db
#   device.run carry=[".bundle"] command="bash scripts/gpu_ssm.sh [extra bench flags]"
# Extra flags go to the bench, e.g. --shapes 4x2048x1024 --no-max-len, or
# --no-tune with SCANTUNE_DB=<a previous round's database>.
# SSM_DEADLINE_S (default 420): past it the bench skips what is left (rows say
# so) and still writes its JSON; SSM_TIMEOUT_S (default 570) is the hard stop.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$out/gpu.txt"

sock=unix:///tmp/scantune-ssm.sock
db=${SCANTUNE_DB:-/tmp/scantune-ssm.db}
if [ -z "${SCANTUNE_DB:-}" ]; then rm -f "$db" "$db"-wal "$db"-shm; fi
"$bin/server/scantuned" --listen "$sock" --db "$db" --compile-threads 16 >"$out/scantuned.log" 2>&1 &
daemon=$!
stop_daemon() { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; }
trap stop_daemon EXIT
cli="$bin/client/scantune --address $sock"
for i in $(seq 1 50); do $cli devices >/dev/null 2>&1 && break; sleep 0.2; done
$cli devices | tee "$out/devices.txt"

echo "== ssm bench"
start=$(date +%s)
timeout "${SSM_TIMEOUT_S:-570}" "$bin/bench/ssm/scantune-ssm-bench" --socket "$sock" --out "$out/ssm.json" \
  --seed-file "$root/tests/integration/data/seed_004.json" --deadline-s "${SSM_DEADLINE_S:-420}" \
  "$@" 2>"$out/ssm_bench.log" | tee "$out/ssm_table.txt"
rc=${PIPESTATUS[0]}
echo "ssm bench: exit code $rc after $(( $(date +%s) - start )) s (124: killed by SSM_TIMEOUT_S)"
tail -5 "$out/ssm_bench.log"
$cli records --op selective_scan --limit 1000 --json >"$out/ssm_records.json" 2>/dev/null
stop_daemon
trap - EXIT
cp "$db" "$out/scantune-ssm.db" 2>/dev/null
exit $rc
