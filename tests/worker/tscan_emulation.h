// A host emulation of selective_scan's tscan kernels (kernels_src/selective_scan.cuh:
// selective_scan_tscan_fwd / _bwd), thread by thread and barrier phase by
// barrier phase, with the kernels' own shared-memory layout
// (SsmTscanSmemLayout), staging slots, warp scans (shuffle by shuffle), state
// groups, double-buffered channel reduction, chunk carries and checkpoints.
// Templated on the arithmetic type R: in double (exact exps) it checks the
// index math against the float64 reference; in float, with a model of
// ex2.approx (a bias in ulps), it shows the accumulated error of fp32
// arithmetic (bench/NOTES.md, selective_scan v3). Test-only; no CUDA.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels_src/selective_scan_params.h"
#include "worker/reference_ssm.h"

namespace scantune::testing {

struct TscanShape {
  int N = 16, DB = 8, TW = 1, K = 4, SW = 1;
};

// How the emulation evaluates the kernel's exps (R = float only; double: exact).
struct ExpModel {
  double ex2_bias_ulp = 0.0;  // ex2.approx modelled as 2^x (1 + bias 2^-24), then rounded to fp32
  // v3: a lane's decay is ex2.approx(A log2e * its sum of delta) and the chunk's carry uses
  // exp(A * the chunk's sum of delta) (ExpAccurate); v2: both the products of the ex2.approx factors.
  bool v3_decays = true;
};

template <typename R>
struct TscanEmulator {
  TscanShape s;
  ExpModel model;
  const SsmRefInputs* in = nullptr;
  std::vector<double> dy;  // (B, L, D)
  // _f1 (FIXED 1): the backward's reductions as partials at SsmFixedSums' offsets, each written by
  // one block, then selective_scan_bwd_finalize<..., DB, TC>'s sums in its order; 0: the atomics' +=.
  bool fixed_sums = false;
  // The blocks' order (the hardware's is unspecified): false (b, d0) ascending, true descending.
  bool blocks_reversed = false;
  // _f1: how often the backward wrote each float of the workspace (partials: exactly once each).
  std::vector<int> workspace_writes;
  long long fixed_partials_begin = 0, fixed_partials_end = 0;

  // Outputs.
  std::vector<double> y, h_final, du, ddelta, dA, dBm, dCm, dDv, dbias, dz, dh0;
  std::vector<R> ckpt;  // (B, chunks, D, N)

  static float Fma(float a, float b, float c) { return std::fma(a, b, c); }
  static double Fma(double a, double b, double c) { return std::fma(a, b, c); }

  R Ex2(R x) const {
    if constexpr (std::is_same_v<R, double>) {
      return std::exp2(x);
    } else {
      const double e = std::exp2(static_cast<double>(x)) * (1.0 + model.ex2_bias_ulp * std::ldexp(1.0, -24));
      const float f = static_cast<float>(e);
      return std::fabs(f) < std::ldexp(1.0f, -126) ? 0.f : f;
    }
  }
  // The kernel's ExpAccurate, operation by operation in fp32.
  R ExpAcc(R x) const {
    if constexpr (std::is_same_v<R, double>) {
      return std::exp(x);
    } else {
      x = std::fmin(std::fmax(x, -86.f), 88.f);
      const float j = std::fma(x, 1.44269504f, 12582912.f);
      const float m = j - 12582912.f;
      float r = std::fma(m, -0.693145751953125f, x);
      r = std::fma(m, -1.42860682e-6f, r);
      float q = 1.f / 5040.f;
      q = std::fma(q, r, 1.f / 720.f);
      q = std::fma(q, r, 1.f / 120.f);
      q = std::fma(q, r, 1.f / 24.f);
      q = std::fma(q, r, 1.f / 6.f);
      q = std::fma(q, r, 0.5f);
      q = std::fma(q, r, 1.f);
      q = std::fma(q, r, 1.f);
      const uint32_t bits = std::bit_cast<uint32_t>(q) + (std::bit_cast<uint32_t>(j) << 23);
      return std::bit_cast<float>(bits);
    }
  }
  static R Softplus(R x) { return x <= R(20) ? std::log1p(std::exp(x)) : x; }
  static R Sigmoid(R x) { return R(1) / (R(1) + std::exp(-x)); }
  static void Kahan(R& sum, R& comp, R v) {
    const R yv = v - comp;
    const R t = sum + yv;
    comp = (t - sum) - yv;
    sum = t;
  }

  int TPC() const { return 32 * s.TW; }
  int TC() const { return TPC() * s.K; }
  int Stagers() const { return s.DB * TPC(); }
  int Threads() const { return Stagers() * s.SW; }
  int RS() const { return static_cast<int>(SsmTscanRowStride(s.DB, s.TW, s.K)); }
  int NS() const { return TC() + 1; }
  int NPG() const { return s.N / s.SW; }
  struct Place {
    int lane, ch, sg, tw, tpos;
  };
  Place PlaceOf(int tid) const {
    Place p;
    p.lane = tid & 31;
    const int warp = tid >> 5;
    p.tw = warp % s.TW;
    p.sg = (warp / s.TW) % s.SW;
    p.ch = warp / (s.TW * s.SW);
    p.tpos = p.tw * 32 + p.lane;
    return p;
  }

  // StageRows: element (ch, step) of source a at a * DB * RS + ch * RS + k * TPC + pos.
  void StageRows(std::vector<R>& sm, long long rows, const std::vector<const std::span<const double>*>& src, long long b,
                 long long d0, long long tc) const {
    const long long L = in->shape.length, D = in->shape.width;
    for (int tid = 0; tid < Threads(); ++tid) {
      const int st = tid % Stagers(), k0 = s.SW == 1 ? 0 : tid / Stagers();
      const int ch = st % s.DB, pos = st / s.DB;
      const long long t0 = tc + static_cast<long long>(pos) * s.K;
      const bool dok = d0 + ch < D;
      for (int kk = 0; kk < (s.K + s.SW - 1) / s.SW; ++kk) {
        const int k = kk * s.SW + k0;
        if (k >= s.K) break;
        const bool ok = dok && t0 + k < L;
        for (size_t a = 0; a < src.size(); ++a) {
          sm[rows + static_cast<long long>(a) * s.DB * RS() + ch * RS() + k * TPC() + pos] =
              ok ? static_cast<R>((*src[a])[(b * L + t0 + k) * D + d0 + ch]) : R(0);
        }
      }
    }
  }
  void StoreRows(std::vector<double>& dst, const std::vector<R>& sm, long long row, long long b, long long d0,
                 long long tc) const {
    const long long L = in->shape.length, D = in->shape.width;
    for (int tid = 0; tid < Threads(); ++tid) {
      const int st = tid % Stagers(), k0 = s.SW == 1 ? 0 : tid / Stagers();
      const int ch = st % s.DB, pos = st / s.DB;
      const long long t0 = tc + static_cast<long long>(pos) * s.K;
      for (int kk = 0; kk < (s.K + s.SW - 1) / s.SW; ++kk) {
        const int k = kk * s.SW + k0;
        if (k >= s.K) break;
        if (d0 + ch < D && t0 + k < L) dst[(b * L + t0 + k) * D + d0 + ch] = sm[row + ch * RS() + k * TPC() + pos];
      }
    }
  }
  void StageBC(std::vector<R>& sm, long long sB, long long sC, long long b, long long tc) const {
    const long long L = in->shape.length;
    const int iters = TC() * s.N / Threads(), step = Threads() / s.N;
    for (int tid = 0; tid < Threads(); ++tid) {
      const int n = tid % s.N, tl0 = tid / s.N;
      const long long base = (b * L + tc) * s.N + tid;
      for (int r = 0; r < iters; ++r) {
        const int tl = r * step + tl0;
        // The kernel's forms (v4): a full chunk (lean kernels) takes the slot at r = 0 plus a constant
        // per r (K and step are powers of two); a partial one the per-r formula.
        const bool full = tc + TC() <= L;
        const int slot = full ? n * NS() + (tl0 % s.K) * TPC() + tl0 / s.K + ((r * step) % s.K) * TPC() +
                                    (r * step) / s.K
                              : n * NS() + (tl % s.K) * TPC() + tl / s.K;
        const bool ok = tl < L - tc;
        sm[sB + slot] = ok ? static_cast<R>(in->Bm[base + static_cast<long long>(r) * Threads()]) : R(0);
        sm[sC + slot] = ok ? static_cast<R>(in->Cm[base + static_cast<long long>(r) * Threads()]) : R(0);
      }
    }
  }

  // ChunkScan over the TPC lanes of one (channel, group): P, H per lane in scan
  // order as the kernel's shuffles see them. Returns the entering values; end
  // per lane (meaningful at the last lane in scan order). TW > 1: the warps'
  // aggregates combine as the kernel's shared-memory loop does.
  void ChunkScan(bool rev, std::vector<R> P, std::vector<R> H, R start, R Pend, std::vector<R>& hin, R& end) const {
    const int tpc = TPC();
    std::vector<R> Pe(tpc), He(tpc), Pw(P), Hw(H);
    for (int w = 0; w < s.TW; ++w) {
      R* p = &Pw[w * 32];
      R* h = &Hw[w * 32];
      for (int off = 1; off < 32; off <<= 1) {
        R po[32], ho[32];
        for (int l = 0; l < 32; ++l) {
          const int srcl = rev ? l + off : l - off;
          const bool valid = srcl >= 0 && srcl < 32;
          po[l] = valid ? p[srcl] : p[l];
          ho[l] = valid ? h[srcl] : h[l];
        }
        for (int l = 0; l < 32; ++l) {
          if (rev ? l + off < 32 : l >= off) {
            h[l] = Fma(p[l], ho[l], h[l]);
            p[l] = p[l] * po[l];
          }
        }
      }
      for (int l = 0; l < 32; ++l) {
        const int srcl = rev ? l + 1 : l - 1;
        const bool valid = srcl >= 0 && srcl < 32;
        Pe[w * 32 + l] = valid ? p[srcl] : p[l];
        He[w * 32 + l] = valid ? h[srcl] : h[l];
        if (l == (rev ? 31 : 0)) {
          Pe[w * 32 + l] = R(1);
          He[w * 32 + l] = R(0);
        }
      }
    }
    hin.assign(tpc, R(0));
    for (int w = 0; w < s.TW; ++w) {
      R st = start, z = 0;
      if (s.TW > 1) {
        const int aggl = rev ? 0 : 31;
        if (rev) {
          for (int j = s.TW - 1; j > w; --j) {
            st = Fma(Pw[j * 32 + aggl], st, Hw[j * 32 + aggl]);
            z = Fma(Pw[j * 32 + aggl], z, Hw[j * 32 + aggl]);
          }
        } else {
          for (int j = 0; j < w; ++j) {
            st = Fma(Pw[j * 32 + aggl], st, Hw[j * 32 + aggl]);
            z = Fma(Pw[j * 32 + aggl], z, Hw[j * 32 + aggl]);
          }
        }
      }
      for (int l = 0; l < 32; ++l) {
        const int t = w * 32 + l;
        hin[t] = Fma(Pe[t], st, He[t]);
        const bool last = rev ? (w == 0 && l == 0) : (w == s.TW - 1 && l == 31);
        if (last) end = model.v3_decays ? Fma(Pend, start, Fma(Pw[t], z, Hw[t])) : Fma(Pw[t], st, Hw[t]);
      }
    }
  }

  // The kernel's ChunkDecays for warp tw of (channel ch, group): the chunk's sum of delta as lane
  // l of that warp sums it (its own K steps, then the other warps' at lane l), the xor butterfly,
  // then ExpAccurate of A[ch, n] times it.
  R ChunkDecayOf(const std::vector<std::vector<R>>& dl, const std::vector<R>& dsum, int tid_of_w0l0, int w, R an) const {
    R v[32];
    for (int l = 0; l < 32; ++l) {
      R sum = dsum[tid_of_w0l0 + w * 32 + l];
      for (int w2 = 0; w2 < s.TW; ++w2) {
        if (w2 == w) continue;
        for (int k = 0; k < s.K; ++k) sum += dl[tid_of_w0l0 + w2 * 32 + l][k];
      }
      v[l] = sum;
    }
    for (int off = 16; off > 0; off >>= 1) {
      R nv[32];
      for (int l = 0; l < 32; ++l) nv[l] = v[l] + v[l ^ off];
      std::memcpy(v, nv, sizeof(v));
    }
    return ExpAcc(an * v[0]);
  }

  // The block's A, A * log2(e) and carry-in (h0 in the forward, zero in the
  // backward) in shared memory, channels past D as zero.
  void StageA(std::vector<R>& sm, const SsmTscanSmem& lay, long long b, long long d0, bool with_h0) const {
    const long long D = in->shape.width;
    const int N = s.N;
    for (int i = 0; i < s.DB * N; ++i) {
      const long long di = d0 + i / N;
      const bool ok = di < D;
      const R a = ok ? static_cast<R>(in->A[di * N + i % N]) : R(0);
      sm[lay.a + i] = a;
      sm[lay.a2 + i] = a * static_cast<R>(1.4426950408889634);
      sm[lay.carry + i] = with_h0 && ok && !in->h0.empty() ? static_cast<R>(in->h0[(b * D + di) * N + i % N]) : R(0);
    }
  }

  // The forward kernel for every block; OUT as the kernel's template argument.
  void Forward(int out) {
    const Shape& sh = in->shape;
    const long long B = sh.batch, L = sh.length, D = sh.width;
    const int N = s.N, K = s.K, DB = s.DB, tpc = TPC(), rs = RS(), ns = NS(), npg = NPG();
    const long long tcn = TC(), chunks = (L + tcn - 1) / tcn;
    const bool gate = !in->z.empty(), bias_on = !in->delta_bias.empty();
    const SsmTscanSmem lay = SsmTscanSmemLayout(N, DB, s.TW, K, s.SW, gate, false);
    if (out & 1) {
      y.assign(B * L * D, std::nan(""));
      h_final.assign(B * D * N, std::nan(""));
    }
    if (out & 2) ckpt.assign(B * chunks * D * N, R(std::nan("")));
    std::vector<const std::span<const double>*> srcs = {&in->delta, &in->u};
    if (gate) srcs.push_back(&in->z);
    const int threads = Threads();
    for (long long b = 0; b < B; ++b) {
      for (long long d0 = 0; d0 < D; d0 += DB) {
        std::vector<R> sm(lay.total, R(std::nan("")));
        StageA(sm, lay, b, d0, /*with_h0=*/true);
        std::vector<std::vector<R>> dl(threads, std::vector<R>(K)), x = dl, yv = dl, zz = dl;
        std::vector<R> dsum(threads);
        int par = 0;
        for (long long c = 0; c < chunks; ++c, par ^= 1) {
          const long long tc = c * tcn;
          StageRows(sm, lay.rows, srcs, b, d0, tc);
          StageBC(sm, lay.bc, lay.bc + N * ns, b, tc);
          for (int tid = 0; tid < threads; ++tid) {
            const Place p = PlaceOf(tid);
            const bool valid = d0 + p.ch < D;
            const R Dv = valid && p.sg == 0 ? static_cast<R>(in->Dv[d0 + p.ch]) : R(0);
            const R bias = bias_on && valid ? static_cast<R>(in->delta_bias[d0 + p.ch]) : R(0);
            dsum[tid] = 0;
            for (int k = 0; k < K; ++k) {
              const int slot = p.ch * rs + k * tpc + p.tpos;
              const bool ok = valid && tc + p.tpos * K + k < L;
              const R r = sm[lay.rows + slot] + bias;
              dl[tid][k] = ok ? (in->delta_softplus ? Softplus(r) : r) : R(0);
              dsum[tid] += dl[tid][k];
              const R u = sm[lay.rows + DB * rs + slot];
              x[tid][k] = dl[tid][k] * u;
              yv[tid][k] = Dv * u;
              if (gate) zz[tid][k] = sm[lay.rows + 2 * DB * rs + slot];
            }
          }
          // The state loop, one (channel, group) at a time (its lanes are threads ch, sg, tpos).
          for (int ch = 0; ch < DB; ++ch) {
            for (int sg = 0; sg < s.SW; ++sg) {
              auto tid_of = [&](int tpos) { return ((ch * s.SW + sg) * s.TW + tpos / 32) * 32 + tpos % 32; };
              for (int j = 0; j < npg; ++j) {
                const int n = sg * npg + j;
                const R a2 = sm[lay.a2 + ch * N + n], an = sm[lay.a + ch * N + n];
                const R start = sm[lay.carry + par * DB * N + ch * N + n];
                std::vector<R> P(tpc), H(tpc), hin;
                std::vector<std::vector<R>> dA(tpc, std::vector<R>(K)), bu = dA;
                for (int tpos = 0; tpos < tpc; ++tpos) {
                  const int tid = tid_of(tpos);
                  R Hh = 0, Pp = 1;
                  for (int k = 0; k < K; ++k) {
                    dA[tpos][k] = Ex2(dl[tid][k] * a2);
                    bu[tpos][k] = x[tid][k] * sm[lay.bc + n * ns + k * tpc + tpos];
                    Hh = Fma(dA[tpos][k], Hh, bu[tpos][k]);
                    Pp *= dA[tpos][k];
                  }
                  H[tpos] = Hh;
                  P[tpos] = model.v3_decays ? Ex2(a2 * dsum[tid]) : Pp;
                }
                R end = 0;
                const R Pend = ChunkDecayOf(dl, dsum, tid_of(0), s.TW - 1, an);
                ChunkScan(false, P, H, start, Pend, hin, end);
                if ((out & 2) && d0 + ch < D) ckpt[((b * chunks + c) * D + d0 + ch) * N + n] = start;
                sm[lay.carry + (par ^ 1) * DB * N + ch * N + n] = end;
                for (int tpos = 0; tpos < tpc; ++tpos) {
                  const int tid = tid_of(tpos);
                  R h = hin[tpos];
                  for (int k = 0; k < K; ++k) {
                    h = Fma(dA[tpos][k], h, bu[tpos][k]);
                    yv[tid][k] = Fma(sm[lay.bc + N * ns + n * ns + k * tpc + tpos], h, yv[tid][k]);
                  }
                }
              }
            }
          }
          if (out & 1) {
            for (int tid = 0; tid < threads; ++tid) {
              const Place p = PlaceOf(tid);
              if (p.sg == 0) continue;
              for (int k = 0; k < K; ++k) sm[lay.red + ((p.sg - 1) * DB + p.ch) * rs + k * tpc + p.tpos] = yv[tid][k];
            }
            for (int tid = 0; tid < threads; ++tid) {
              const Place p = PlaceOf(tid);
              if (p.sg != 0) continue;
              for (int k = 0; k < K; ++k) {
                R v = yv[tid][k];
                for (int g = 1; g < s.SW; ++g) v += sm[lay.red + ((g - 1) * DB + p.ch) * rs + k * tpc + p.tpos];
                if (gate) v *= zz[tid][k] * Sigmoid(zz[tid][k]);
                sm[lay.rows + DB * rs + p.ch * rs + k * tpc + p.tpos] = v;
              }
            }
            StoreRows(y, sm, lay.rows + DB * rs, b, d0, tc);
          }
        }
        if (out & 1) {
          for (int i = 0; i < DB * N; ++i) {
            const long long di = d0 + i / N;
            if (di < D) h_final[(b * D + di) * N + i % N] = sm[lay.carry + par * DB * N + i];
          }
        }
      }
    }
  }

  // The backward kernel for every block (after Forward(2 or 3) wrote ckpt), then the finalize.
  void Backward() {
    const Shape& sh = in->shape;
    const long long B = sh.batch, L = sh.length, D = sh.width;
    const int N = s.N, K = s.K, DB = s.DB, tpc = TPC(), rs = RS(), ns = NS(), npg = NPG(), SW = s.SW;
    const long long tcn = TC(), chunks = (L + tcn - 1) / tcn;
    const bool gate = !in->z.empty(), bias_on = !in->delta_bias.empty();
    const SsmTscanSmem lay = SsmTscanSmemLayout(N, DB, s.TW, K, SW, gate, true);
    du.assign(B * L * D, std::nan(""));
    ddelta = du;
    if (gate) dz = du;
    std::vector<R> wdA(D * N, R(0)), wdB(B * L * N, R(0)), wdC(B * L * N, R(0)), wdDv(D, R(0)), wdbias(D, R(0));
    // _f1: the workspace's partial region (poisoned), written through `put` as the kernel stores.
    const SsmFixedSums fx = SsmFixedSumsLayout(B, L, D, N, DB, SsmWorkspaceLayout(B, L, D, N, 0, tcn).total);
    std::vector<R> ws;
    if (fixed_sums) {
      ws.assign(fx.total, R(std::nan("")));
      workspace_writes.assign(fx.total, 0);
      fixed_partials_begin = fx.dB;
      fixed_partials_end = fx.total;
    }
    auto put = [&](long long at, R v) {
      ws[at] = v;
      ++workspace_writes[at];
    };
    dh0.assign(B * D * N, std::nan(""));
    std::vector<const std::span<const double>*> srcs = {&in->delta, &in->u};
    const std::span<const double> dys(dy);
    srcs.push_back(&dys);
    if (gate) srcs.push_back(&in->z);
    const int threads = Threads();
    std::vector<std::pair<long long, long long>> blocks;  // (b, d0)
    for (long long b = 0; b < B; ++b) {
      for (long long d0 = 0; d0 < D; d0 += DB) blocks.emplace_back(b, d0);
    }
    if (blocks_reversed) std::reverse(blocks.begin(), blocks.end());
    for (const auto& [b, d0] : blocks) {
      {
        const long long group = d0 / DB;  // blockIdx.x
        std::vector<R> sm(lay.total, R(std::nan("")));
        StageA(sm, lay, b, d0, /*with_h0=*/false);
        for (int i = 0; i < 2 * DB * s.TW * N; ++i) sm[lay.da + i] = 0;
        const long long sB = lay.bc, sC = sB + N * ns, sSum = sC + N * ns;
        std::vector<R> dDv_acc(threads, 0), dDv_comp(threads, 0), dbias_acc(threads, 0), dbias_comp(threads, 0);
        std::vector<std::vector<R>> dl(threads, std::vector<R>(K)), u = dl, x = dl, dyg = dl, duv = dl, dd = dl,
                                    dsoft = dl, gz = dl, yp = dl;
        std::vector<R> dsum(threads);
        int par = 0;
        for (long long c = chunks - 1; c >= 0; --c, par ^= 1) {
          const long long tc = c * tcn;
          StageRows(sm, lay.rows, srcs, b, d0, tc);
          StageBC(sm, sB, sC, b, tc);
          for (int i = 0; i < DB * N; ++i) {
            const long long di = d0 + i / N;
            sm[lay.ck + i] = di < D ? ckpt[((b * chunks + c) * D + di) * N + i % N] : R(0);
          }
          for (int tid = 0; tid < threads; ++tid) {
            const Place p = PlaceOf(tid);
            const bool valid = d0 + p.ch < D;
            const R Dv = valid ? static_cast<R>(in->Dv[d0 + p.ch]) : R(0);
            const R Dv0 = p.sg == 0 ? Dv : R(0);
            const R bias = bias_on && valid ? static_cast<R>(in->delta_bias[d0 + p.ch]) : R(0);
            R dDv_chunk = 0;
            dsum[tid] = 0;
            for (int k = 0; k < K; ++k) {
              const int slot = p.ch * rs + k * tpc + p.tpos;
              const bool ok = valid && tc + p.tpos * K + k < L;
              const R r = sm[lay.rows + slot] + bias;
              dl[tid][k] = ok ? (in->delta_softplus ? Softplus(r) : r) : R(0);
              dsum[tid] += dl[tid][k];
              dsoft[tid][k] = in->delta_softplus ? Sigmoid(r) : R(1);
              u[tid][k] = sm[lay.rows + DB * rs + slot];
              const R dyv = sm[lay.rows + 2 * DB * rs + slot];
              if (gate) {
                const R z = sm[lay.rows + 3 * DB * rs + slot];
                const R sig = Sigmoid(z);
                dyg[tid][k] = dyv * z * sig;
                gz[tid][k] = dyv * sig * (R(1) + z * (R(1) - sig));
                yp[tid][k] = Dv0 * u[tid][k];
              } else {
                dyg[tid][k] = dyv;
              }
              x[tid][k] = dl[tid][k] * u[tid][k];
              duv[tid][k] = Dv0 * dyg[tid][k];
              dd[tid][k] = 0;
              dDv_chunk = Fma(dyg[tid][k], u[tid][k], dDv_chunk);
            }
            if (p.sg == 0) Kahan(dDv_acc[tid], dDv_comp[tid], dDv_chunk);
          }
          for (int j = 0; j < npg; ++j) {
            for (int ch = 0; ch < DB; ++ch) {
              for (int sg = 0; sg < SW; ++sg) {
                auto tid_of = [&](int tpos) { return ((ch * SW + sg) * s.TW + tpos / 32) * 32 + tpos % 32; };
                const int n = sg * npg + j;
                const R a2 = sm[lay.a2 + ch * N + n], an = sm[lay.a + ch * N + n];
                const R hstart = sm[lay.ck + ch * N + n];
                std::vector<R> P(tpc), H(tpc), hin, Pr(tpc), Rr(tpc), qin;
                std::vector<std::vector<R>> dA(tpc, std::vector<R>(K)), hs = dA, cdy = dA;
                for (int tpos = 0; tpos < tpc; ++tpos) {
                  const int tid = tid_of(tpos);
                  R Hh = 0, Pp = 1;
                  for (int k = 0; k < K; ++k) {
                    dA[tpos][k] = Ex2(dl[tid][k] * a2);
                    hs[tpos][k] = x[tid][k] * sm[sB + n * ns + k * tpc + tpos];
                    Hh = Fma(dA[tpos][k], Hh, hs[tpos][k]);
                    Pp *= dA[tpos][k];
                  }
                  H[tpos] = Hh;
                  P[tpos] = model.v3_decays ? Ex2(a2 * dsum[tid]) : Pp;
                }
                R unused = 0, qend = 0;
                ChunkScan(false, P, H, hstart, R(1), hin, unused);
                const R Pend = ChunkDecayOf(dl, dsum, tid_of(0), 0, an);
                for (int tpos = 0; tpos < tpc; ++tpos) {
                  const int tid = tid_of(tpos);
                  R h = hin[tpos];
                  for (int k = 0; k < K; ++k) {
                    h = Fma(dA[tpos][k], h, hs[tpos][k]);
                    hs[tpos][k] = h;
                  }
                  R Rv = 0;
                  for (int k = K - 1; k >= 0; --k) {
                    cdy[tpos][k] = sm[sC + n * ns + k * tpc + tpos] * dyg[tid][k];
                    Rv = dA[tpos][k] * (cdy[tpos][k] + Rv);
                  }
                  Rr[tpos] = Rv;
                }
                ChunkScan(true, P, Rr, sm[lay.carry + par * DB * N + ch * N + n], Pend, qin, qend);
                sm[lay.carry + (par ^ 1) * DB * N + ch * N + n] = qend;
                std::vector<R> dAn(tpc, R(0));
                for (int tpos = 0; tpos < tpc; ++tpos) {
                  const int tid = tid_of(tpos);
                  R q = qin[tpos];
                  const long long red = lay.red + ((((j & 1) * SW + sg) * 2) * DB + ch) * tcn + tpos;
                  for (int k = K - 1; k >= 0; --k) {
                    const R g = cdy[tpos][k] + q;
                    const R hprev = k ? hs[tpos][k - 1] : hin[tpos];
                    q = dA[tpos][k] * g;
                    const R gdh = q * hprev;
                    const R gB = g * sm[sB + n * ns + k * tpc + tpos];
                    duv[tid][k] = Fma(gB, dl[tid][k], duv[tid][k]);
                    dd[tid][k] = Fma(gB, u[tid][k], Fma(an, gdh, dd[tid][k]));
                    dAn[tpos] = Fma(dl[tid][k], gdh, dAn[tpos]);
                    if (gate) yp[tid][k] = Fma(sm[sC + n * ns + k * tpc + tpos], hs[tpos][k], yp[tid][k]);
                    sm[red + k * tpc] = g * x[tid][k];
                    sm[red + DB * tcn + k * tpc] = dyg[tid][k] * hs[tpos][k];
                  }
                }
                for (int w = 0; w < s.TW; ++w) {  // WarpSum: the xor butterfly
                  R v[32];
                  for (int l = 0; l < 32; ++l) v[l] = dAn[w * 32 + l];
                  for (int off = 16; off > 0; off >>= 1) {
                    R nv[32];
                    for (int l = 0; l < 32; ++l) nv[l] = v[l] + v[l ^ off];
                    std::memcpy(v, nv, sizeof(v));
                  }
                  const long long at = lay.da + (ch * s.TW + w) * N + n;
                  R sum = sm[at], comp = sm[at + DB * s.TW * N];
                  Kahan(sum, comp, v[0]);
                  sm[at] = sum;
                  sm[at + DB * s.TW * N] = comp;
                }
              }
            }
            // Barrier; the reduction of buffer j & 1 by every thread.
            const long long rbuf = lay.red + (j & 1) * SW * 2 * DB * tcn;
            for (int i = 0; i < 2 * tcn * SW; ++i) {
              const int g = static_cast<int>(i / (2 * tcn)), which = static_cast<int>((i / tcn) % 2),
                        slot = static_cast<int>(i % tcn);
              R sum = 0;
              for (int cc = 0; cc < DB; ++cc) sum += sm[rbuf + ((g * 2 + which) * DB + cc) * tcn + slot];
              sm[sSum + (which * N + g * npg + j) * ns + slot] = sum;
            }
          }
          for (int i = 0; i < 2 * tcn * N; ++i) {
            const int which = static_cast<int>(i / (tcn * N)), r = static_cast<int>(i % (tcn * N));
            const int tl = r / N, n = r % N;
            const long long t = tc + tl;
            if (t >= L) continue;
            const R v = sm[sSum + (which * N + n) * ns + (tl % K) * tpc + tl / K];
            if (fixed_sums) {
              put((which ? fx.dC : fx.dB) + ((group * B + b) * L + t) * N + n, v);
            } else {
              (which ? wdC : wdB)[(b * L + t) * N + n] += v;
            }
          }
          const int parts = gate ? 3 : 2;
          for (int tid = 0; tid < threads; ++tid) {
            const Place p = PlaceOf(tid);
            if (p.sg == 0) continue;
            for (int k = 0; k < K; ++k) {
              const long long dst = lay.red + (((p.sg - 1) * parts) * DB + p.ch) * tcn + k * tpc + p.tpos;
              sm[dst] = duv[tid][k];
              sm[dst + DB * tcn] = dd[tid][k];
              if (gate) sm[dst + 2 * DB * tcn] = yp[tid][k];
            }
          }
          for (int tid = 0; tid < threads; ++tid) {
            const Place p = PlaceOf(tid);
            if (p.sg != 0) continue;
            const bool valid = d0 + p.ch < D;
            R dbias_chunk = 0;
            for (int k = 0; k < K; ++k) {
              for (int g = 1; g < SW; ++g) {
                const long long src = lay.red + (((g - 1) * parts) * DB + p.ch) * tcn + k * tpc + p.tpos;
                duv[tid][k] += sm[src];
                dd[tid][k] += sm[src + DB * tcn];
                if (gate) yp[tid][k] += sm[src + 2 * DB * tcn];
              }
              const int slot = p.ch * rs + k * tpc + p.tpos;
              const bool ok = valid && tc + p.tpos * K + k < L;
              const R ddl = ok ? dd[tid][k] * dsoft[tid][k] : R(0);
              dbias_chunk += ddl;
              sm[lay.rows + slot] = duv[tid][k];
              sm[lay.rows + DB * rs + slot] = ddl;
              if (gate) sm[lay.rows + 2 * DB * rs + slot] = yp[tid][k] * gz[tid][k];
            }
            if (bias_on) Kahan(dbias_acc[tid], dbias_comp[tid], dbias_chunk);
          }
          StoreRows(du, sm, lay.rows, b, d0, tc);
          StoreRows(ddelta, sm, lay.rows + DB * rs, b, d0, tc);
          if (gate) StoreRows(dz, sm, lay.rows + 2 * DB * rs, b, d0, tc);
        }
        for (int i = 0; i < DB * N; ++i) {
          const long long di = d0 + i / N;
          if (di >= D) continue;
          dh0[(b * D + di) * N + i % N] = sm[lay.carry + par * DB * N + i];
          R sum = 0;
          for (int w = 0; w < s.TW; ++w) sum += sm[lay.da + ((i / N) * s.TW + w) * N + i % N];
          if (fixed_sums) {
            put(fx.dA + (b * D + di) * N + i % N, sum);
          } else {
            wdA[di * N + i % N] += sum;
          }
        }
        for (int w = 0; w < threads / 32; ++w) {
          R v[32], vb[32];
          for (int l = 0; l < 32; ++l) {
            v[l] = dDv_acc[w * 32 + l];
            vb[l] = dbias_acc[w * 32 + l];
          }
          for (int off = 16; off > 0; off >>= 1) {
            R nv[32], nb[32];
            for (int l = 0; l < 32; ++l) {
              nv[l] = v[l] + v[l ^ off];
              nb[l] = vb[l] + vb[l ^ off];
            }
            std::memcpy(v, nv, sizeof(v));
            std::memcpy(vb, nb, sizeof(vb));
          }
          const Place p = PlaceOf(w * 32);
          if (d0 + p.ch < D && p.sg == 0) {
            if (fixed_sums) {
              put(fx.dDv + b * D + d0 + p.ch, v[0]);
              if (bias_on) put(fx.dbias + b * D + d0 + p.ch, vb[0]);
            } else {
              wdDv[d0 + p.ch] += v[0];
              if (bias_on) wdbias[d0 + p.ch] += vb[0];
            }
          }
        }
      }
    }
    if (fixed_sums) {  // selective_scan_bwd_finalize<..., DB, TC>: groups, then batches, ascending
      const long long tokens = B * L * N, params = D * N;
      for (long long i = 0; i < tokens; ++i) {
        R sb = 0, sc = 0;
        for (long long g = 0; g < fx.groups; ++g) {
          sb += ws[fx.dB + g * tokens + i];
          sc += ws[fx.dC + g * tokens + i];
        }
        wdB[i] = sb;
        wdC[i] = sc;
      }
      for (long long i = 0; i < params; ++i) {
        R sa = 0;
        for (long long b = 0; b < B; ++b) sa += ws[fx.dA + b * params + i];
        wdA[i] = sa;
      }
      for (long long i = 0; i < D; ++i) {
        R sd = 0, sbias = 0;
        for (long long b = 0; b < B; ++b) {
          sd += ws[fx.dDv + b * D + i];
          if (bias_on) sbias += ws[fx.dbias + b * D + i];
        }
        wdDv[i] = sd;
        wdbias[i] = sbias;
      }
    }
    auto widen = [](const std::vector<R>& v) { return std::vector<double>(v.begin(), v.end()); };
    dA = widen(wdA);
    dBm = widen(wdB);
    dCm = widen(wdC);
    dDv = widen(wdDv);
    if (bias_on) dbias = widen(wdbias);
  }
};

}  // namespace scantune::testing
