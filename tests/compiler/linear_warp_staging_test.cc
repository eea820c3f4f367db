// A host emulation of lookbacksmem _o3's warp-local staging
// (kernels_src/linear_scan_smem.cuh: WarpStaging, StageWarpRows, and the
// per-group waits in ScanSmemTile's local composition), mirroring the
// kernel's index math, for every warp-staged variant (_o3, and _o5-_o7 which
// stagger the first wave; the enumerated ones and those valid by name) and dtype that
// CanImplement admits. Checks (no GPU):
//  - each staged 16-byte chunk of a and x is copied exactly once, and by the
//    warp whose threads read it, in a group no later than the step that
//    first reads it (so a thread's cp.async.wait_group + __syncwarp suffice:
//    no block barrier between staging and the scan);
//  - in float64, a forward built from tiles staged that way (global offsets
//    as the kernel computes them, the segment composition, combine, carry-in
//    and rescan of ScanSmemTile) equals a sequential scan.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/plan.h"

namespace scantune {
namespace {

// WarpStaging<T, VEC, THREADS, STRIP, TILE> of the kernel, on the host.
struct WarpStagingModel {
  int elt, vec, threads, strip, tile;
  int lanes, segs, steps, segs_per_warp, per_row, rows_per_pass, groups, group_steps, passes, chunk_elts;

  WarpStagingModel(int elt_bytes, const Variant& v)
      : elt(elt_bytes), vec(v.vec), threads(v.threads), strip(v.strip), tile(v.tile) {
    lanes = strip / vec;
    segs = threads / lanes;
    steps = tile / segs;
    segs_per_warp = 32 / lanes;
    per_row = strip * elt / 16;
    rows_per_pass = 32 / per_row;
    groups = 4;
    group_steps = steps / groups;
    passes = segs_per_warp * group_steps / rows_per_pass;
    chunk_elts = 16 / elt;
  }
  // The kernel's static_asserts.
  bool Valid() const {
    return lanes <= 32 && 32 % lanes == 0 && per_row <= 32 && 32 % per_row == 0 && steps % groups == 0 &&
           group_steps % rows_per_pass == 0;
  }
  int RowOf(int g, int k) const {
    return (k * rows_per_pass / group_steps) * steps + g * group_steps + (k * rows_per_pass) % group_steps;
  }
  // Thread tid's first staged row and column (elements) in StageWarpRows.
  int Row0(int tid) const { return (tid / 32) * segs_per_warp * steps + (tid % 32) / per_row; }
  int Col(int tid) const { return ((tid % 32) % per_row) * chunk_elts; }
};

// The enumerated warp-staged variants, and those valid by name only (session 5's GPU run timed them).
std::vector<Variant> WarpStagedVariants() {
  std::vector<Variant> out;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
    if (v.algorithm == Algorithm::kLookbackSmem && (v.order == 3 || v.order >= 5)) out.push_back(v);
  }
  for (const char* name : {"lookbacksmem_v4_t256_c128_i128_o3", "lookbacksmem_v4_t128_c32_i512_o3",
                           "lookbacksmem_v4_t256_c64_i256_o5", "lookbacksmem_v4_t128_c64_i256_o6"}) {
    out.push_back(*Variant::Parse(name));
  }
  return out;
}

Problem Fwd(DType dtype, int64_t b, int64_t l, int64_t w) {
  Problem p;
  p.shape = {b, l, w};
  p.dtype = dtype;
  p.mode = Mode::kFwd;
  return p;
}

TEST(WarpStaging, EnumeratedWhereTheGpuRunSaysAndValidByName) {
  std::set<std::string> enumerated;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
    if (v.algorithm == Algorithm::kLookbackSmem && v.order >= 3) enumerated.insert(v.Name());
  }
  // (_d1: the o3 points' chained look-back twins, for the deterministic selection; _k1: the shape baked into
  // the o3 points and t128's o5.)
  EXPECT_EQ(enumerated, (std::set<std::string>{"lookbacksmem_v4_t128_c64_i256_o3", "lookbacksmem_v4_t256_c64_i256_o3",
                                               "lookbacksmem_v4_t128_c64_i256_o5", "lookbacksmem_v4_t128_c64_i256_o7",
                                               "lookbacksmem_v4_t256_c64_i256_o7", "lookbacksmem_v4_t128_c64_i256_o3_d1",
                                               "lookbacksmem_v4_t256_c64_i256_o3_d1", "lookbacksmem_v4_t128_c64_i256_o3_k1",
                                               "lookbacksmem_v4_t256_c64_i256_o3_k1",
                                               "lookbacksmem_v4_t128_c64_i256_o5_k1"}));
  const std::vector<Variant> vs = WarpStagedVariants();
  ASSERT_EQ(vs.size(), 14u);
  for (const Variant& v : vs) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const Status st = CanImplement(v, Fwd(dtype, 1, 8192, 2560), DeviceLimits());
      EXPECT_TRUE(st.ok()) << v.Name() << " " << DTypeName(dtype) << ": " << st.ToString();
      EXPECT_TRUE(WarpStagingModel(ElementBytes(dtype), v).Valid()) << v.Name() << " " << DTypeName(dtype);
    }
  }
}

TEST(WarpStaging, EveryChunkOnceByTheWarpThatReadsItInTime) {
  for (const Variant& v : WarpStagedVariants()) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(v.Name() + " " + DTypeName(dtype));
      const WarpStagingModel m(ElementBytes(dtype), v);
      ASSERT_TRUE(m.Valid());
      // owner[row][chunk] = warp * groups + group, or -1 (a and x are staged alike).
      std::vector<int> owner(static_cast<size_t>(m.tile) * m.per_row, -1);
      for (int tid = 0; tid < m.threads; ++tid) {
        for (int g = 0; g < m.groups; ++g) {
          for (int k = 0; k < m.passes; ++k) {
            const int row = m.Row0(tid) + m.RowOf(g, k);
            const int chunk = m.Col(tid) / m.chunk_elts;
            ASSERT_GE(row, 0);
            ASSERT_LT(row, m.tile);
            int& o = owner[static_cast<size_t>(row) * m.per_row + chunk];
            ASSERT_EQ(o, -1) << "row " << row << " chunk " << chunk << " copied twice";
            o = (tid / 32) * m.groups + g;
          }
        }
      }
      for (int o : owner) ASSERT_NE(o, -1) << "a chunk was never copied";
      // Thread (seg, lane) reads row seg * steps + i at step i, elements lane * vec + [0, vec).
      for (int tid = 0; tid < m.threads; ++tid) {
        const int seg = tid / m.lanes, lane = tid % m.lanes;
        for (int i = 0; i < m.steps; ++i) {
          const int row = seg * m.steps + i;
          for (int e = lane * m.vec; e < (lane + 1) * m.vec; ++e) {
            const int o = owner[static_cast<size_t>(row) * m.per_row + e / m.chunk_elts];
            EXPECT_EQ(o / m.groups, tid / 32) << "thread " << tid << " step " << i << ": another warp's chunk";
            EXPECT_LE(o % m.groups, i / m.group_steps) << "thread " << tid << " step " << i << ": a later group";
          }
        }
      }
    }
  }
}

// Float64 forward of interior tiles staged by StageWarpRows' offsets, then
// scanned as ScanSmemTile does (the carry-in is the sequential state before
// the tile, which the look-back composes; ORDER 2's protocol is unchanged).
TEST(WarpStaging, ForwardFromWarpStagedTilesIsTheSequentialScan) {
  for (const Variant& v : WarpStagedVariants()) {
    SCOPED_TRACE(v.Name());
    const WarpStagingModel m(2, v);
    const int64_t B = 2, L = 3 * m.tile, W = 3 * m.strip;
    std::vector<double> a(B * L * W), x(B * L * W), ref(B * L * W), h(B * L * W, NAN);
    uint32_t seed = 12345;
    auto next = [&]() {
      seed = seed * 1664525u + 1013904223u;
      return (seed >> 8) * (1.0 / 16777216.0);
    };
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = 0.5 + 0.5 * next();
      x[i] = next() - 0.5;
    }
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t c = 0; c < W; ++c) {
        double s = 0;
        for (int64_t t = 0; t < L; ++t) {
          const int64_t i = (b * L + t) * W + c;
          s = a[i] * s + x[i];
          ref[i] = s;
        }
      }
    }
    const int64_t strips = W / m.strip, tiles = L / m.tile;
    for (int64_t ticket = 0; ticket < B * strips * tiles; ++ticket) {
      // MakeSmemTileIndex (forward).
      const int64_t tile = ticket / (B * strips), seq = ticket % (B * strips);
      const int64_t b = seq / strips, c_strip = (seq % strips) * m.strip, base = tile * m.tile;
      std::vector<double> sa(static_cast<size_t>(m.tile) * m.strip, NAN), sx(sa.size(), NAN);
      for (int tid = 0; tid < m.threads; ++tid) {
        const int64_t off = (b * L + base + m.Row0(tid)) * W + c_strip + m.Col(tid);
        for (int g = 0; g < m.groups; ++g) {
          for (int k = 0; k < m.passes; ++k) {
            const int r = m.RowOf(g, k);
            const int64_t go = r * W;
            const size_t so = static_cast<size_t>(m.Row0(tid) + r) * m.strip + m.Col(tid);
            for (int e = 0; e < m.chunk_elts; ++e) {
              sa[so + e] = a[off + go + e];
              sx[so + e] = x[off + go + e];
            }
          }
        }
      }
      for (int ch = 0; ch < m.strip; ++ch) {
        const int64_t c = c_strip + ch;
        // Segment aggregates, exclusive prefixes over segments, the carry-in.
        std::vector<double> A(m.segs, 1.0), H(m.segs, 0.0);
        for (int seg = 0; seg < m.segs; ++seg) {
          for (int i = 0; i < m.steps; ++i) {
            const size_t k = static_cast<size_t>(seg * m.steps + i) * m.strip + ch;
            A[seg] *= sa[k];
            H[seg] = sa[k] * H[seg] + sx[k];
          }
        }
        const double carry = base == 0 ? 0.0 : ref[(b * L + base - 1) * W + c];
        double pA = 1.0, pH = 0.0;
        for (int seg = 0; seg < m.segs; ++seg) {
          double s = pA * carry + pH;
          for (int i = 0; i < m.steps; ++i) {
            const size_t k = static_cast<size_t>(seg * m.steps + i) * m.strip + ch;
            s = sa[k] * s + sx[k];
            h[(b * L + base + seg * m.steps + i) * W + c] = s;
          }
          pH = A[seg] * pH + H[seg];
          pA *= A[seg];
        }
      }
    }
    for (size_t i = 0; i < h.size(); ++i) ASSERT_NEAR(h[i], ref[i], 1e-12) << "element " << i;
  }
}

TEST(WarpStaging, CanImplementRefusesWhatTheKernelCannotStage) {
  const DeviceLimits h200;
  const Problem p = Fwd(DType::kBF16, 4, 2048, 2048);
  auto parsed = [](const char* name) {
    StatusOr<Variant> v = Variant::Parse(name);
    EXPECT_TRUE(v.ok()) << name;
    return *v;
  };
  // 8 steps per thread: 2 per group, fewer than the 4 rows a warp copies per pass (bf16 c64).
  EXPECT_EQ(CanImplement(parsed("lookbacksmem_v4_t256_c64_i128_o3"), p, h200).code(), StatusCode::kInvalidArgument);
  // 64 lanes: a segment spans two warps.
  EXPECT_EQ(CanImplement(parsed("lookbacksmem_v4_t256_c256_i64_o3"), p, h200).code(), StatusCode::kInvalidArgument);
  // fp32 v8 c256: 64 chunks per row, more than a warp copies per pass.
  EXPECT_EQ(CanImplement(parsed("lookbacksmem_v8_t256_c256_i64_o3"), Fwd(DType::kF32, 1, 4096, 1024), h200).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(CanImplement(parsed("lookbacksmem_v4_t128_c64_i128_o3"), p, h200).ok());
  EXPECT_EQ(CanImplement(parsed("lookbacksmem_v4_t256_c64_i128_o5"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(parsed("lookbacksmem_v4_t256_c64_i128_o7"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CanImplement(parsed("lookbacksmem_v4_t256_c64_i128_o4"), p, h200).ok());  // not warp-staged
}

}  // namespace
}  // namespace scantune
