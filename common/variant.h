// Variant: one point of the kernel design space, as a small value struct with
// one canonical name ("lookback_v4_t256_s8_i8"). Name() and Parse() round-trip
// losslessly; knobs an algorithm does not use are held at their defaults and
// are not part of its name.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace scantune {

enum class Algorithm {
  kSequential,   // one thread walks the whole sequence of `vec` channels
  kChunked,      // three phases: chunk-local scan, carry scan over chunks, fix-up
  kLookback,     // single pass: warp/block prefix over time segments, decoupled look-back between time tiles
  kLookbackSmem, // kLookback with the tile staged in shared memory by cp.async instead of held in registers
  kLookbackPipe, // kLookbackSmem made persistent: each block loops over tiles, next tile's loads in flight
  kFused,       // selective_scan: state-blocked single pass (dim_block channels x state_split lanes per block)
  kFusedSeg,    // selective_scan: kFused with time split into segments (local scan, carry, rescan)
  kTimeScan,    // selective_scan: lanes along time (items per lane), loop over states, chunk carry; one exp per (t, d, n)
  kTestFault,    // test-only: writes far outside its buffers (must be recorded, never selected)
  kTestHang,     // test-only: spins forever (must be recorded as TIMEOUT)
};

struct Variant {
  Algorithm algorithm = Algorithm::kSequential;
  int vec = 1;        // channels per thread (vector width of loads/stores): 1, 2, 4, 8
  int threads = 128;  // threads per block
  int chunk = 0;      // kChunked: timesteps per chunk
  int segments = 1;   // kLookback: threads along time within a block
  int items = 1;      // kLookback: timesteps per thread (held in registers)
  int prefetch = 1;   // kSequential: timesteps loaded ahead (loads in flight per thread)
  int strip = 0;      // kLookbackSmem, kLookbackPipe: channels per block
                      // kChunked (samu): 0, or the look-back forward's strip ("_l32": the forward of
                      // lookback_v2_t256_s16_i16_o3, the backward chunked's)
  int tile = 0;       // kLookbackSmem, kLookbackPipe: timesteps per tile (staged in shared memory)
  int blocks_per_sm = 0;  // kLookbackPipe: persistent blocks per SM (at most; fewer where shared memory is short)
                          // kChunked (samu) with _l and _b: n ("_p{n}"): the look-back forward as a persistent grid
                          // of n blocks per SM, the next tile's x staged while it runs this one; 0: a block per tile
  int save_every = 0;     // kChunked (samu): 0 saves h at every token; n (2, 4) saves it at every n-th
                          // and the backward recomputes the rows between from x ("_h4")
  int h_from_y = 0;       // kChunked (samu) with _l: 1 ("_y1"): the forward stores y only, the backward takes
                          // h = y / gamma (h itself only for 8-channel groups with a gamma near 0)
  int fwd_blocks = 0;     // kChunked (samu) with _l: n ("_b{n}"): the look-back forward keeps b at 16 bits in place
                          // of its staged x (no fp32 region) and is compiled for n blocks per SM; 0: _o3's 4
  int fwd_items = 0;      // kChunked (samu) with _l and _b: n ("_i32"): the look-back forward's tokens per thread
                          // (its tile is segments x n: fewer tiles, each block's prologue and look-back over
                          // twice the elements); 0: lookback_v2_t256_s{segments}_i16's 16
  int order = 0;          // kLookbackSmem: 0 tiles by atomic ticket; 1 by block index (no ticket; "_o1")
                          // kLookback (rglru, samu): 2 block index + packed look-back + launch epochs + PDL ("_o2")
  int dim_block = 0;    // kFused, kFusedSeg: channels per block
  int state_split = 0;  // kFused, kFusedSeg: lanes per channel (each holds state / state_split states)
  int segment = 0;      // kFusedSeg: timesteps per time segment
                        // kTimeScan: dim_block (channels per block), segments (warps along time per channel),
                        // items (timesteps per lane), state_split (warps per channel along states; 0: one,
                        // and no "_s" in the name)
  int chained = 0;      // kLookbackSmem (linear_scan), kLookback (rglru) with the packed look-back (order >= 2) and
                        // kChunked (samu) with _l (its look-back forward):
                        // 1 ("_d1"): each tile takes only its predecessor's inclusive state, never an aggregate
                        // (a chained scan): the carries compose in one order, so every output has the same bits
                        // on every run (Deterministic), at a round trip per tile on each chain's critical path
  int atomic_sums = 0;  // kChunked (samu): 1 ("_a1"): the backward rescan adds its parameter and controller
                        // partials into the gradients by atomics (no finalize kernel; the order of the fp32
                        // additions varies from run to run); 0: partials per block, summed in a fixed order
  int baked = 0;        // kChunked (samu) with _l, kLookback (rglru) with _o2 / _o3, kLookbackSmem (linear_scan):
                        // 1 ("_k1"): the problem's batch, length and width are template arguments of the forward's
                        // and the backward's scan kernels (compiled per shape, as the service compiles per problem
                        // anyway), so their index arithmetic folds into constants; such a module runs only the
                        // shape it was compiled for. 0: the shape at run time
  int fixed_sums = 0;   // kTimeScan (selective_scan): 1 ("_f1"): the backward writes its reductions (dBm, dCm over
                        // the channel groups, dA, dDv, ddelta_bias over the batch) as partials per block, which
                        // its finalize sums in a fixed order (Deterministic); 0: float atomics

  std::string Name() const;
  static StatusOr<Variant> Parse(std::string_view name);

  // Orders variants by simplicity; used when two are within timing noise.
  int Complexity() const;
  bool IsTestOnly() const { return algorithm == Algorithm::kTestFault || algorithm == Algorithm::kTestHang; }

  auto operator<=>(const Variant&) const = default;
};

struct VariantHash {
  size_t operator()(const Variant& v) const;
};

const char* AlgorithmName(Algorithm algorithm);

}  // namespace scantune
