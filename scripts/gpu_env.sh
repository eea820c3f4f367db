# Sourced by the scripts that run on the GPU machine (gpu_round.sh,
# gpu_profile.sh): makes the carried .bundle usable there and sets
#   root  the repository copy the device tool ran the command in
#   out   where results go ($OUT, which the device tool brings back)
#   bin   the build tree (its ctest files name absolute paths under the
#         source dir it was built in, so that path is linked to this copy)
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
src=$(cat "$root/.bundle/SOURCE_DIR")
if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; fi
[ -e "$root/build" ] || ln -s "$root/.bundle/build" "$root/build"
bin=$src/build

# start_daemon NAME LOG: scantuned from the bundle on unix:///tmp/scantune-NAME.sock with a fresh
# /tmp/scantune-NAME.db (16 compile threads), its log in LOG; returns once it answers. Sets sock, db,
# daemon (its pid) and cli (the CLI on that socket).
start_daemon() {
  sock=unix:///tmp/scantune-$1.sock
  db=/tmp/scantune-$1.db
  rm -f "$db" "$db"-wal "$db"-shm
  "$bin/server/scantuned" --listen "$sock" --db "$db" --compile-threads 16 >"$2" 2>&1 &
  daemon=$!
  cli="$bin/client/scantune --address $sock"
  for _ in $(seq 1 50); do $cli devices >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "scantuned did not answer on $sock (log: $2)" >&2
  return 1
}

# The served samu selections per seed shape (bf16 fwd_bwd; session 36 on the H200), the baseline that a call
# times a samu change against on its own card.
declare -A samu_selections=(
  [4x2048x2048]=chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1
  [1x8192x2560]=chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1
  [1x32768x1024]=chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1
  [1x32768x2048]=chunked_v8_t256_c128_l64_y1_b5_i32_a1_k1
)

# tune_samu_selections RES [SUFFIX] [DEADLINE] [JOB_S]: on the daemon of start_daemon ($cli), one bf16 fwd_bwd
# tuning job per seed shape over its selection (and, with SUFFIX, the selection's twin named with it, e.g. _e1),
# progress in RES/tune_SHAPE.progress. No job starts after the epoch second DEADLINE, and each is cut at JOB_S
# seconds (0 or none: no limit). Then the records: RES/records_all.txt, and RES/by_shape.txt (shape, variant,
# state, fwd / bwd / fwd_bwd ms).
tune_samu_selections() {
  local res=$1 suffix=${2:-} deadline=${3:-0} job_s=${4:-0} shape variants
  for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
    [ "$deadline" -eq 0 ] || [ "$(date +%s)" -lt "$deadline" ] || break
    echo "== tune samu $shape"
    variants=${samu_selections[$shape]}${suffix:+,${samu_selections[$shape]}$suffix}
    timeout "$job_s" $cli tune --op samu --shape $shape --dtype bf16 --mode fwd_bwd --variants "$variants" \
      --skip-unfit --force 2>"$res/tune_$shape.progress" | tail -1
  done
  $cli records --limit 200 >"$res/records_all.txt"
  grep -E "^ *[0-9]+ +samu " "$res/records_all.txt" | awk '{print $5, $3, $4, $8, $9, $10}' | sort |
    tee "$res/by_shape.txt"
}

# h200_checks_with_time_left DEADLINE [MIN_S]: on an H200 with more than MIN_S seconds (default 0) left before the
# epoch second DEADLINE, session 37's h200_checks.sh within that time; on any other card, a line saying so.
h200_checks_with_time_left() {
  local deadline=$1 min_s=${2:-0} name left
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  left=$(( deadline - $(date +%s) ))
  case "$name" in
    *H200*) [ "$left" -gt "$min_s" ] && CHECKS_GUARD=$left CHECKS_TESTS_S=$(( left - 20 )) \
              bash "$root/bench/results/2026-12-05-s37/h200_checks.sh" ;;
    *) echo "not an H200: h200_checks.sh not run" ;;
  esac
}
