// The micro-benchmarks' one error check: a failed CUDA runtime call prints where and why, and the enclosing
// function (main or a helper returning int) returns 1.
#pragma once

#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t e = (call);                                                            \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)
