#!/usr/bin/env bash
# Makes .bundle/: what the GPU machine needs to run our binaries, which it
# cannot build (it has no gRPC/protobuf/SQLite/spdlog dev files):
#   .bundle/build  the build tree without objects and static libraries (binaries stripped;
#                  ctest files kept, so `ctest -L gpu` runs there)
#   .bundle/lib    the shared-library closure of our binaries, minus the system's
#                  own (libc, libm, libstdc++, libgcc_s, ld-linux) and the CUDA toolkit's
#                  (driver, NVRTC, cuBLAS: /usr/local/cuda/lib64 there has the same CUDA 13).
# Send it with device.run carry=[".bundle"] and run scripts/gpu_round.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d build ] || { echo "build/ is missing: run scripts/setup.sh first" >&2; exit 1; }
rm -rf .bundle && mkdir -p .bundle/lib .bundle/build
rsync -a --prune-empty-dirs \
  --exclude '*.o' --exclude '*.a' --exclude '*.ninja' --exclude '.ninja_*' --exclude 'CMakeCache.txt' \
  --exclude 'gen/' --exclude '*.pb.*' --include '*/' \
  --include 'CTestTestfile.cmake' --include '*_include.cmake' --include '*_tests.cmake' \
  --include '*.cc' --exclude 'CMakeFiles/**' --include '*' build/ .bundle/build/
find .bundle/build -type f -name '*.cc' -delete
# Only the GPU suites run there (ctest -L gpu): the other test programs stay home
# (the device tool carries at most 64 MiB with the working tree).
find .bundle/build/tests -type f -perm -u+x ! -name '*gpu*' -delete
find .bundle/build -type f -perm -u+x | while read -r f; do
  if file "$f" | grep -q ELF; then
    strip --strip-all "$f"
    ldd "$f" | awk '/=> \// {print $3}'
  fi
done | sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libnvrtc[^/]*|libcublas(Lt)?|libcudart|libpthread|libdl|librt)\.so' \
  | xargs -r -I{} cp -L {} .bundle/lib/
# ctest files name the absolute source and build paths; gpu_round.sh links them.
pwd > .bundle/SOURCE_DIR
du -sh .bundle .bundle/lib .bundle/build
