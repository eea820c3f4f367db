// Enumeration of variants, the CanImplement pruning step, and launch plans:
// which template instances a variant needs, and the grid, block, shared
// memory and workspace of each launch for a problem. Pure functions; no CUDA.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "common/variant.h"
#include "proto/scantune.pb.h"

namespace scantune {

// What the device allows. Defaults describe an H200 (sm_90) so that CI, which
// has no GPU, enumerates and compiles for the target device.
struct DeviceLimits {
  int cc_major = 9;
  int cc_minor = 0;
  int sm_count = 132;
  int max_threads_per_block = 1024;
  int max_shared_per_block = 227 * 1024;
  int l2_bytes = 60 * 1024 * 1024;

  std::string Arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  static DeviceLimits FromProto(const v1::DeviceInfo& device);
};

struct Launch {
  std::string name_expression;        // e.g. "linear_scan_fwd_lookback<__nv_bfloat16, 4, 256, 8, 8>"
  std::string phase;                  // "fwd" or "bwd"
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;
  bool dependent_launch = false;      // may overlap the previous kernel (PDL); see KernelLaunch
  uint32_t cluster_x = 1;             // blocks per thread-block cluster along x (1: none); see KernelLaunch
};

struct LaunchPlan {
  std::vector<Launch> launches;       // in order; a phase's launches run back to back
  uint64_t workspace_bytes = 0;
  uint64_t workspace_zero_bytes = 0;  // prefix zeroed before each phase
  bool workspace_zero_once = false;   // ... or once, at allocation (launch epochs)
};

// Every variant of the operator's design space (the cross product of its
// knobs), test-only variants included only on request.
std::vector<Variant> EnumerateVariants(Op op, bool include_test_variants);

// OK, or why the variant cannot run this problem on this device (pruned
// before compiling; never compiled, never timed).
Status CanImplement(const Variant& variant, const Problem& problem, const DeviceLimits& device);

// Whether every output of the problem's mode (fwd: y or h and the final
// state; bwd: every input and parameter gradient) has the same bits on every
// run with the same inputs. Not so where floating-point sums are added by
// atomics in arrival order, or where a decoupled look-back composes its
// predecessors' aggregates up to whichever inclusive prefix it finds first.
// Rules by family in each planner; the GPU suite runs the deterministic ones
// repeatedly and compares the bits.
bool Deterministic(const Variant& variant, const Problem& problem);

// Launches for the problem's mode (fwd: fwd phase; bwd: bwd; fwd_bwd: both).
StatusOr<LaunchPlan> MakePlan(const Variant& variant, const Problem& problem, const DeviceLimits& device);

// All template instances (name expressions) the variant's module holds for
// this operator and dtype, fwd and bwd; the module is compiled once for both.
// selective_scan's instances also depend on N and its options (`ssm`).
std::vector<std::string> NameExpressions(const Variant& variant, Op op, DType dtype, const SsmOptions& ssm = {},
                                         const Shape& shape = {});

// Whether `_k1` (Variant::baked) can compile for the shape: it bakes B, L and W into int template arguments
// (scan::WithShape), so each must be in [1, 2^31 - 1].
bool Bakeable(const Shape& shape);

// The header the operator's NVRTC module includes ("linear_scan.cuh").
const char* MainHeader(Op op);

// One field of a parameter struct, for ParamLayout.
v1::ParamField ParamFieldOf(const char* name, size_t offset, size_t size, const char* type, const char* meaning);

// The layout of the operator's by-value parameter struct, for GetKernel.
std::vector<v1::ParamField> ParamLayout(Op op);
uint32_t ParamSize(Op op);

}  // namespace scantune
