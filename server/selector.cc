#include "server/selector.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "compiler/plan.h"

namespace scantune {

bool ClearlyFaster(const RankedCandidate& a, const RankedCandidate& b, double min_margin_pct) {
  const double gap = b.median_ms - a.median_ms;
  return gap > 2.0 * std::max(a.mad_ms, b.mad_ms) && gap > a.median_ms * min_margin_pct / 100.0;
}

Decision Decide(const std::vector<RankedCandidate>& candidates, double min_margin_pct) {
  Decision d;
  if (candidates.empty()) return d;
  // Fastest first; ties broken by simplicity then name so the order is total.
  std::vector<int> order(candidates.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  auto key = [&](int i) {
    const RankedCandidate& c = candidates[i];
    return std::make_tuple(c.median_ms, c.complexity, c.variant);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  const int fastest = order[0];
  if (order.size() == 1) {
    d.winner = fastest;
    d.decided_by = kDecidedAlone;
    return d;
  }
  // Those the fastest does not clearly beat are ties within noise.
  int simplest = fastest;
  bool beats_all = true;
  for (size_t k = 1; k < order.size(); ++k) {
    const RankedCandidate& c = candidates[order[k]];
    if (ClearlyFaster(candidates[fastest], c, min_margin_pct)) continue;
    beats_all = false;
    const RankedCandidate& s = candidates[simplest];
    if (std::tie(c.complexity, c.variant) < std::tie(s.complexity, s.variant)) simplest = order[k];
  }
  d.winner = simplest;
  d.runner_up = simplest == fastest ? order[1] : fastest;
  d.decided_by = beats_all ? kDecidedFaster : kDecidedSimpler;
  const double w = candidates[d.winner].median_ms;
  d.margin_pct = w > 0 ? (candidates[d.runner_up].median_ms - w) / w * 100.0 : 0.0;
  return d;
}

const v1::Stats& RankedStats(const v1::Record& record, v1::Mode mode) {
  switch (mode) {
    case v1::BWD: return record.bwd();
    case v1::FWD_BWD: return record.fwd_bwd();
    default: return record.fwd();
  }
}

double ShapeDistance(const Shape& a, const Shape& b) {
  auto ld = [](double x, double y) { return std::fabs(std::log(std::max(x, 1.0)) - std::log(std::max(y, 1.0))); };
  return ld(static_cast<double>(a.batch * a.length), static_cast<double>(b.batch * b.length)) +
         ld(static_cast<double>(a.length), static_cast<double>(b.length)) +
         ld(static_cast<double>(a.width), static_cast<double>(b.width));
}

StatusOr<std::optional<v1::Selection>> Selector::Exact(const std::string& device_model, const Problem& problem,
                                                      bool deterministic) const {
  ASSIGN_OR_RETURN(std::optional<v1::Selection> exact, store_->GetSelection(device_model, problem, deterministic));
  if (exact || !deterministic) return exact;
  ASSIGN_OR_RETURN(std::optional<v1::Selection> ordinary, store_->GetSelection(device_model, problem, false));
  if (!ordinary) return ordinary;
  StatusOr<Variant> variant = Variant::Parse(ordinary->variant());
  if (!variant.ok() || !Deterministic(*variant, problem)) return std::optional<v1::Selection>();
  ordinary->set_deterministic(true);
  return ordinary;
}

StatusOr<v1::Selection> Selector::Find(const std::string& device_model, const std::string& current_fingerprint,
                                       const Problem& problem, v1::MissPolicy policy, bool deterministic) const {
  ASSIGN_OR_RETURN(std::optional<v1::Selection> exact, Exact(device_model, problem, deterministic));
  if (exact) {
    v1::Selection selection = std::move(*exact);
    selection.set_stale(selection.fingerprint() != current_fingerprint);
    selection.set_nearest(false);
    if (!selection.has_tuned_shape()) *selection.mutable_tuned_shape() = ToProto(problem).shape();
    return selection;
  }
  const std::string what = deterministic ? "no deterministic selection for " : "no selection for ";
  const std::string where = problem.Key() + " on '" + device_model + "'";
  if (policy != v1::NEAREST) {
    if (deterministic) {
      ASSIGN_OR_RETURN(std::optional<v1::Selection> ordinary, store_->GetSelection(device_model, problem, false));
      if (ordinary) {
        return NotFound(what + where + ": its selection " + ordinary->variant() +
                        " is not deterministic and it was tuned before deterministic selections were kept, or no "
                        "deterministic variant was legal; re-tune it (Tune with force)");
      }
    }
    return NotFound(what + where +
                    "; tune it first (Tune), or ask with on_miss=NEAREST (nearest tuned shape, flagged) "
                    "or on_miss=TUNE_NOW (tune now, then answer)");
  }
  ASSIGN_OR_RETURN(std::vector<v1::Selection> all, store_->ListSelections(device_model, problem, deterministic));
  if (deterministic) {
    // As Exact: a shape with no deterministic row (tuned before they were
    // kept) answers by its ordinary selection where that variant is itself
    // deterministic.
    std::set<std::tuple<uint32_t, uint32_t, uint32_t>> covered;
    for (const v1::Selection& s : all) {
      covered.insert({s.problem().shape().batch(), s.problem().shape().length(), s.problem().shape().width()});
    }
    ASSIGN_OR_RETURN(std::vector<v1::Selection> ordinary, store_->ListSelections(device_model, problem, false));
    for (v1::Selection& s : ordinary) {
      if (covered.count({s.problem().shape().batch(), s.problem().shape().length(), s.problem().shape().width()})) {
        continue;
      }
      StatusOr<Variant> variant = Variant::Parse(s.variant());
      if (!variant.ok() || !Deterministic(*variant, problem)) continue;
      s.set_deterministic(true);
      all.push_back(std::move(s));
    }
  }
  const v1::Selection* best = nullptr;
  double best_distance = 0;
  Shape best_shape;
  for (const v1::Selection& s : all) {
    const Shape shape{s.problem().shape().batch(), s.problem().shape().length(), s.problem().shape().width()};
    const double distance = ShapeDistance(problem.shape, shape);
    // Ties (up to rounding of the logs) go to the smaller shape, so every
    // caller gets the same answer whatever order the store lists them in.
    constexpr double kTie = 1e-9;
    if (!best || distance < best_distance - kTie || (distance <= best_distance + kTie && shape < best_shape)) {
      best = &s;
      best_distance = distance;
      best_shape = shape;
    }
  }
  if (!best) {
    return NotFound(what + where + ", and no tuned shape with the same op, dtype, mode and h0 " +
                    "to answer NEAREST from; tune it first (Tune) or ask with on_miss=TUNE_NOW");
  }
  v1::Selection selection = *best;
  *selection.mutable_tuned_shape() = best->problem().shape();
  *selection.mutable_problem() = ToProto(problem);
  selection.set_nearest(true);
  selection.set_stale(selection.fingerprint() != current_fingerprint);
  return selection;
}

}  // namespace scantune
