#include "bench/ssm/families.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/variant.h"

namespace scantune::ssmbench {

std::string FamilyOf(std::string_view variant) {
  if (auto parsed = Variant::Parse(variant); parsed.ok()) return AlgorithmName(parsed->algorithm);
  return std::string(variant.substr(0, variant.find('_')));
}

std::string SeedImplOf(std::string_view family) {
  if (family == "sequential") return "scan";
  if (family == "chunked") return "chunked";
  // tscan scans time with warp shuffles (an associative scan of the (dA, dBu)
  // pairs), seed 004's assoc row done in one fused kernel.
  if (family == "assoc" || family == "tscan") return "assoc";
  if (family == "fused" || family == "fusedseg") return "pallas";
  return std::string(family);
}

namespace {
int SeedRank(const std::string& family) {
  static const std::map<std::string, int> kRank = {{"scan", 0}, {"assoc", 1}, {"chunked", 2}, {"pallas", 3}};
  auto it = kRank.find(SeedImplOf(family));
  return it == kRank.end() ? 4 : it->second;
}
}  // namespace

bool FamilyBefore(const std::string& a, const std::string& b) {
  const int ra = SeedRank(a), rb = SeedRank(b);
  return ra != rb ? ra < rb : a < b;
}

const v1::Stats& StatsOf(const v1::Record& record, v1::Mode mode) {
  switch (mode) {
    case v1::BWD: return record.bwd();
    case v1::FWD_BWD: return record.fwd_bwd();
    default: return record.fwd();
  }
}

std::vector<FamilyPick> BestPerFamily(const std::vector<v1::Record>& records, v1::Mode mode) {
  struct Acc {
    const v1::Record* best_first = nullptr;   // fastest OK first-pass record
    const v1::Record* best_retime = nullptr;  // fastest OK re-timing record
    const v1::Record* failure = nullptr;      // lowest-id non-OK record
    std::set<std::string> variants, variants_ok;
  };
  std::map<std::string, Acc> by_family;
  auto faster = [&](const v1::Record* current, const v1::Record& r) {
    if (current == nullptr) return true;
    const double a = StatsOf(r, mode).median_ms(), b = StatsOf(*current, mode).median_ms();
    return a != b ? a < b : r.id() < current->id();
  };
  for (const v1::Record& r : records) {
    Acc& acc = by_family[FamilyOf(r.variant())];
    acc.variants.insert(r.variant());
    const bool ok = r.state() == v1::OK && StatsOf(r, mode).median_ms() > 0.0;
    if (ok) {
      acc.variants_ok.insert(r.variant());
      const v1::Record*& slot = r.origin() == "retime" ? acc.best_retime : acc.best_first;
      if (faster(slot, r)) slot = &r;
    } else if (r.state() != v1::OK && (acc.failure == nullptr || r.id() < acc.failure->id())) {
      acc.failure = &r;
    }
  }
  std::vector<FamilyPick> picks;
  for (const auto& [family, acc] : by_family) {
    FamilyPick pick;
    pick.family = family;
    pick.variants = static_cast<int>(acc.variants.size());
    pick.variants_ok = static_cast<int>(acc.variants_ok.size());
    const v1::Record* best = acc.best_first ? acc.best_first : acc.best_retime;
    if (best) {
      pick.ok = true;
      pick.record = *best;
    } else if (acc.failure) {
      pick.record = *acc.failure;
    } else {
      continue;  // only OK records without timings of this mode: nothing to report
    }
    picks.push_back(std::move(pick));
  }
  std::sort(picks.begin(), picks.end(), [](const FamilyPick& a, const FamilyPick& b) {
    return FamilyBefore(a.family, b.family);
  });
  return picks;
}

std::vector<Row> RowsFromPicks(const std::vector<FamilyPick>& picks, const SsmShape& shape, Mode mode) {
  const TensorBytes bytes = TensorBytesOf(SsmProblem(shape, mode));
  std::vector<Row> rows;
  for (const FamilyPick& pick : picks) {
    Row row;
    row.family = pick.family;
    row.variant = pick.record.variant();
    row.mode = mode;
    row.shape = shape;
    row.variants = pick.variants;
    row.variants_ok = pick.variants_ok;
    row.record_id = pick.record.id();
    if (!pick.ok) {
      row.kind = "error";
      row.state = v1::ResultState_Name(pick.record.state());
      row.error = pick.record.detail().empty() ? "(no detail)" : pick.record.detail();
      rows.push_back(std::move(row));
      continue;
    }
    const v1::Stats& stats = StatsOf(pick.record, ToProto(mode));
    row.median_ms = stats.median_ms();
    row.q1_ms = stats.q1_ms();
    row.q3_ms = stats.q3_ms();
    row.inner = stats.inner_count();
    row.compile_s = pick.record.compile_ms() / 1e3;
    row.workspace_mb = Mib(pick.record.memory().workspace_bytes());
    row.arg_mb = Mib(bytes.args);
    row.out_mb = Mib(bytes.outs);
    row.rel_err_vs_ref = pick.record.rel_err();
    row.state = "OK";
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<const Row*> MaxLenFamilies(const std::vector<Row>& rows, bool all) {
  const Row* anchor = nullptr;
  for (const Row& t : rows) {
    if (!t.kind.empty() || t.mode != Mode::kFwdBwd) continue;
    if (anchor == nullptr || std::tie(t.shape.dim, t.shape.seq) > std::tie(anchor->shape.dim, anchor->shape.seq) ||
        (t.shape == anchor->shape && t.median_ms < anchor->median_ms)) {
      anchor = &t;
    }
  }
  if (anchor == nullptr) return {};
  std::vector<const Row*> out = {anchor};
  for (const Row& t : rows) {
    if (all && &t != anchor && t.kind.empty() && t.mode == Mode::kFwdBwd && t.shape == anchor->shape) {
      out.push_back(&t);
    }
  }
  return out;
}

}  // namespace scantune::ssmbench
