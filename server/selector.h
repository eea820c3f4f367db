// Selector: the two judgements of selection. Decide() picks the winner of a
// re-timed field of legal candidates (the fastest only when it beats the
// runner-up by more than the noise, else the simplest within noise), and
// Selector::Find answers "which variant for this problem on this device
// model?" from the Store, flagging stale answers (another fingerprint) and
// answering misses by the caller's policy (NOT_FOUND or NEAREST; TUNE_NOW is
// the Engine's, which tunes and asks again). Both are deterministic: the same
// question gets the same answer for every caller.
//
// Thread safety: Decide is a pure function; Selector holds only a Store
// pointer (the Store is thread-safe), so it may be used from any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "db/store.h"
#include "proto/scantune.pb.h"

namespace scantune {

struct RankedCandidate {
  std::string variant;
  int complexity = 0;     // Variant::Complexity()
  double median_ms = 0;   // of the ranked mode (the problem's mode)
  double mad_ms = 0;
};

struct Decision {
  int winner = -1;        // index into the candidates; -1 when there are none
  int runner_up = -1;     // the fastest other candidate; -1 when alone
  double margin_pct = 0;  // (runner-up median - winner median) / winner median * 100 (negative: the simpler won)
  std::string decided_by; // kDecidedFaster, kDecidedSimpler or kDecidedAlone
};

inline constexpr const char* kDecidedFaster = "faster";
inline constexpr const char* kDecidedSimpler = "simpler (within noise)";
inline constexpr const char* kDecidedAlone = "only legal candidate";

// `a` beats `b` by more than the noise: the medians differ by more than twice
// the larger MAD and by more than min_margin_pct of a's median.
bool ClearlyFaster(const RankedCandidate& a, const RankedCandidate& b, double min_margin_pct = 1.0);

// The fastest wins if it is clearly faster than every other candidate;
// otherwise, among those the fastest does not clearly beat, the simplest wins
// (Complexity, then name).
Decision Decide(const std::vector<RankedCandidate>& candidates, double min_margin_pct = 1.0);

// The statistics of the mode a problem is ranked by (its own mode).
const v1::Stats& RankedStats(const v1::Record& record, v1::Mode mode);

// Log-distance between shapes over B*L, L and W (what a scan's cost follows).
double ShapeDistance(const Shape& a, const Shape& b);

class Selector {
 public:
  explicit Selector(Store* store) : store_(store) {}

  // The stored selection for the exact problem, stale when its fingerprint is
  // not `current_fingerprint`. On a miss: NEAREST answers with the selection
  // of the nearest tuned shape (same op, dtype, mode and h0), flagged nearest;
  // any other policy is NOT_FOUND, naming the problem and the policies.
  // `deterministic`: the selection made among the deterministic variants, or
  // else the ordinary one where its variant is deterministic itself (a
  // problem tuned before deterministic selections were stored).
  StatusOr<v1::Selection> Find(const std::string& device_model, const std::string& current_fingerprint,
                               const Problem& problem, v1::MissPolicy policy, bool deterministic = false) const;

 private:
  StatusOr<std::optional<v1::Selection>> Exact(const std::string& device_model, const Problem& problem,
                                               bool deterministic) const;

  Store* store_;
};

}  // namespace scantune
