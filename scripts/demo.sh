#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, start scantuned on a Unix
# socket, and do something real with it:
#   with a GPU:    tune linear_scan bf16 fwd_bwd at 4x2048x2048, select, show records,
#                  plot the candidates and list the selections;
#   without a GPU: compile a real kernel through NVRTC (GetKernel), show that
#                  tuning answers "no GPU" and that selection/records are served.
# The daemon keeps running afterwards; stop it with: kill $(cat /tmp/scantune-demo.pid)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
sock=${SCANTUNE_ADDRESS:-unix:///tmp/scantune-demo.sock}
db=${SCANTUNE_DB:-$PWD/scantune.db}
if [ -f /tmp/scantune-demo.pid ] && kill -0 "$(cat /tmp/scantune-demo.pid)" 2>/dev/null; then
  kill "$(cat /tmp/scantune-demo.pid)"; sleep 0.5
fi
nohup build/server/scantuned --listen "$sock" --db "$db" >/tmp/scantune-demo.log 2>&1 &
echo $! >/tmp/scantune-demo.pid
cli="build/client/scantune --address $sock"
for _ in $(seq 1 100); do $cli devices >/dev/null 2>&1 && break; sleep 0.1; done
echo "scantuned pid $(cat /tmp/scantune-demo.pid), listening on $sock, database $db (log: /tmp/scantune-demo.log)"
$cli devices
problem="--op linear_scan --shape 4x2048x2048 --dtype bf16 --mode fwd_bwd"
if $cli devices --json | grep -q '"uuid"'; then
  $cli tune $problem
  $cli select $problem
  $cli records --op linear_scan --shape 4x2048x2048 --state OK --limit 10
  $cli plot $problem --top 15
  $cli selections
else
  echo "== no GPU: compiling the kernel of a named variant with NVRTC (GetKernel)"
  $cli kernel --op linear_scan --shape 4x2048x2048 --dtype bf16 --mode fwd --variant lookbacksmem_v4_t256_c64_i256 \
    --out /tmp/scantune-demo.cubin
  echo "== tuning without a GPU:"
  $cli tune $problem || true
  echo "== selection for a never-tuned shape:"
  $cli select $problem --on-miss nearest || true
  echo "== what the database has decided (tuned on a GPU before, if this database was):"
  $cli selections
fi
