#!/usr/bin/env bash
# Installs the build dependencies (Debian packages) and builds everything into
# build/. Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
          protobuf-compiler libspdlog-dev libsqlite3-dev libgtest-dev sqlite3 python3-grpcio python3-protobuf
          rsync openssl)  # rsync: scripts/make_bundle.sh (the GPU machine's bundle); openssl: the TLS tests' certificates
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "installing: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The CUDA toolkit (NVRTC, cuda.h) is expected at /usr/local/cuda or on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

jobs=${SCANTUNE_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=${SCANTUNE_BUILD_TYPE:-Release} >/dev/null
ninja -C build -j"$jobs"
