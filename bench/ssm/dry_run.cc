// The dry run: synthetic records (real variant names and plans, medians as
// multiples of the floor) through the same BestPerFamily, RowsFromPicks,
// writer and table as a real run, with one failing family, one OOM
// device_peak point and a max_len limited by the cap from the plans' bytes.
#include <algorithm>
#include <map>

#include "bench/ssm/bench_runner.h"
#include "bench/ssm/families.h"
#include "common/variant.h"
#include "compiler/plan.h"

namespace scantune::ssmbench {
namespace {

std::string Fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", digits, v);
  return b;
}

}  // namespace

SsmReport DryRunReport(const SsmOptions& o) {
  SsmReport report;
  report.dry_run = true;
  report.batch = o.shapes.empty() ? 4 : o.shapes.front().batch;
  report.state = o.state;
  report.mem_cap_gib = o.mem_cap_gib;
  AddProtocolNotes(o.mem_cap_gib, &report);
  report.device = {{"gpu", "no GPU"}, {"device_kind", "none"}, {"driver", "none"}, {"nvrtc", "none"}};

  // Up to two real variants per family, so names, families and plans are the real ones.
  std::map<std::string, std::vector<Variant>> by_family;
  for (const Variant& v : EnumerateVariants(Op::kSelectiveScan, false)) {
    auto& list = by_family[FamilyOf(v.Name())];
    if (list.size() < 2) list.push_back(v);
  }
  // Synthetic medians: multiples of the floor, per family.
  const std::map<std::string, double> factor = {
      {"sequential", 40.0}, {"chunked", 12.0}, {"fused", 3.0}, {"fusedseg", 2.5}};
  const DeviceLimits limits;
  int64_t id = 0;
  std::vector<Row> timing;
  for (const SsmShape& shape : o.shapes) {
    for (Mode mode : o.modes) {
      const Problem problem = SsmProblem(shape, mode);
      const double floor_ms = FloorOf(problem).ms();
      std::vector<v1::Record> records;
      const bool largest = shape.dim >= 1024 && shape.seq >= 8192 && mode == Mode::kFwdBwd;
      for (const auto& [family, variants] : by_family) {
        for (size_t k = 0; k < variants.size(); ++k) {
          v1::Record r;
          r.set_id(++id);
          r.set_variant(variants[k].Name());
          r.set_origin("tuned");
          r.set_compile_ms(800.0 + 100.0 * k);
          auto plan = MakePlan(variants[k], problem, limits);
          if (!plan.ok()) continue;  // pruned: no record, as in the daemon
          r.mutable_memory()->set_workspace_bytes(plan->workspace_bytes);
          if (largest && family == "chunked") {
            r.set_state(v1::OUT_OF_MEMORY);
            r.set_detail("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (synthetic)");
            records.push_back(std::move(r));
            continue;
          }
          r.set_state(v1::OK);
          r.set_rel_err(2e-7 * (k + 1));
          const double median = floor_ms * (factor.count(family) ? factor.at(family) : 5.0) * (1.0 + 0.1 * k);
          v1::Stats* s = mode == Mode::kFwd ? r.mutable_fwd() : r.mutable_fwd_bwd();
          s->set_median_ms(median);
          s->set_q1_ms(median * 0.99);
          s->set_q3_ms(median * 1.01);
          s->set_inner_count(static_cast<int>(std::clamp(1.0 / median, 1.0, 1000.0)));
          records.push_back(std::move(r));
        }
      }
      std::vector<Row> rows = RowsFromPicks(BestPerFamily(records, ToProto(mode)), shape, mode);
      for (Row& r : rows) {
        if (r.kind.empty() && r.family != "sequential") r.rel_err_vs_scan = 3e-7;
      }
      for (Row& r : rows) timing.push_back(std::move(r));
    }
  }
  report.rows = timing;
  // device_peak: planned bytes over a synthetic 500 MiB context; sequential fwd_bwd at the longest shape "fails".
  for (const SsmShape& shape : o.peak_shapes) {
    for (Mode mode : o.modes) {
      for (const Row& t : timing) {
        if (!t.kind.empty() || t.shape != shape || t.mode != mode) continue;
        Row row;
        row.kind = "device_peak";
        row.family = t.family;
        row.variant = t.variant;
        row.mode = mode;
        row.shape = shape;
        const Problem problem = SsmProblem(shape, mode);
        auto variant = Variant::Parse(t.variant);
        auto plan = variant.ok() ? MakePlan(*variant, problem, limits) : StatusOr<LaunchPlan>(variant.status());
        const uint64_t ws = plan.ok() ? plan->workspace_bytes : 0;
        row.need_mb = Mib(NeedBytes(problem, ws));
        if (t.family == "sequential" && mode == Mode::kFwdBwd && shape.seq >= 8192) {
          row.error = "OUT_OF_MEMORY: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (synthetic)";
        } else {
          row.baseline_mb = 500.0;
          row.delta_mb = row.need_mb + 2.0;
          row.peak_mb = row.baseline_mb + row.delta_mb;
        }
        report.rows.push_back(std::move(row));
      }
    }
  }
  // max_len from the plans alone: the cap decides.
  if (o.max_len) {
    const std::vector<const Row*> families = MaxLenFamilies(timing, /*all=*/false);
    if (!families.empty()) {
      const Row* anchor = families.front();
      Row row;
      row.kind = "max_len";
      row.family = anchor->family;
      row.variant = anchor->variant;
      row.mode = Mode::kFwdBwd;
      row.shape = {anchor->shape.batch, 0, 1024, anchor->shape.state};
      row.limit = LengthLimit(row.shape);
      auto variant = Variant::Parse(anchor->variant);
      for (int64_t seq = o.max_len_start; variant.ok() && seq <= row.limit; seq *= 2) {
        SsmShape shape = row.shape;
        shape.seq = seq;
        const Problem problem = SsmProblem(shape, Mode::kFwdBwd);
        auto plan = MakePlan(*variant, problem, limits);
        if (!plan.ok()) {
          row.first_failure = "cannot implement: " + plan.status().ToString();
          row.first_failure_seq = seq;
          break;
        }
        const uint64_t need = NeedBytes(problem, plan->workspace_bytes);
        if (need > CapBytes(o.mem_cap_gib)) {
          row.first_failure = "needs " + Fixed(Mib(need), 1) + " MiB, over the cap of " + Fixed(o.mem_cap_gib, 1) +
                              " GiB";
          row.first_failure_seq = seq;
          break;
        }
        row.max_seq = seq;
        row.need_mb_at_max = Mib(need);
        row.peak_mb_at_max = Mib(need) + 2.0;
      }
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

}  // namespace scantune::ssmbench
