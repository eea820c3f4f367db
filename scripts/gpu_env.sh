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
