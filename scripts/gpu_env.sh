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
