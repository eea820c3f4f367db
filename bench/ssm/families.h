// Families of selective_scan variants and the choice of each family's row
// from the records of one Tune job. Pure value code; thread-safe.
//
// A family is the algorithm part of a variant name ("fusedseg" for
// "fusedseg_d32_s4_c8_g256"); it maps to the implementation seed 004 names
// for the same idea: sequential ~ scan, chunked ~ chunked, assoc ~ assoc,
// fused and fusedseg ~ pallas (the fused single-pass path).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/ssm/report.h"
#include "proto/scantune.pb.h"

namespace scantune::ssmbench {

// The family of a variant name: the parsed algorithm's name, or for a name
// the parser does not know (a family newer than this binary) the text before
// its first '_'.
std::string FamilyOf(std::string_view variant);

// Seed 004's impl for a family ("scan", "chunked", "assoc", "pallas"); the
// family itself for one the seed has no counterpart of.
std::string SeedImplOf(std::string_view family);

// Families in the order rows are written: seed 004's order (scan, assoc,
// chunked, pallas) by seed impl, then by name.
bool FamilyBefore(const std::string& a, const std::string& b);

// The family's representative among a job's records.
struct FamilyPick {
  std::string family;
  bool ok = false;                // an OK record exists; `record` is the fastest of them
  v1::Record record;              // ok: the fastest OK record; else the family's first failure
  int variants = 0;               // distinct variants of the family among the records
  int variants_ok = 0;            // of which have an OK record
};

// The Stats of the record for `mode` (fwd -> fwd(), fwd_bwd -> fwd_bwd()).
const v1::Stats& StatsOf(const v1::Record& record, v1::Mode mode);

// Per family, the OK record with the smallest median of `mode`. First-pass
// records (origin other than "retime") are preferred: they timed every
// variant in the same counterbalanced rounds; a re-timing record counts only
// for a family with no first-pass OK record. A family with no OK record
// yields its failure (ok = false) -- the lowest record id, for a stable pick.
// Families come back in FamilyBefore order.
std::vector<FamilyPick> BestPerFamily(const std::vector<v1::Record>& records, v1::Mode mode);

// The rows of one (shape, mode): a timing row per family with an OK record
// (median/q1/q3/inner of the mode, compile_s, workspace from the record;
// arg_mb and out_mb from the operator's tensors), an error row per family
// without one (its state and detail). rel_err_vs_scan is left for the caller.
std::vector<Row> RowsFromPicks(const std::vector<FamilyPick>& picks, const SsmShape& shape, Mode mode);

// The rows max_len runs for: at the largest fwd_bwd shape timed (D first,
// then L), the fastest OK family (the best fwd_bwd family) first, then with
// `all` every other OK family there. Empty without an OK fwd_bwd row.
std::vector<const Row*> MaxLenFamilies(const std::vector<Row>& rows, bool all);

}  // namespace scantune::ssmbench
