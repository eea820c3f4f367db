// Records <-> JSON in the seeds' schema, for the Export and Import RPCs.
//
// Export writes seed 001's layout (schema_version, protocol, environment,
// rows[] with shape, architecture = op, backend = variant, forward / backward /
// forward_backward statistics, rounds, memory, parameters, ...) and adds the
// fields of ours that the seed has no name for (state, dtype, mode, rel_err,
// device, source_hash, record_id, ...), so an export imports back losslessly
// enough to be counted and compared.
//
// Import reads our own export and the three seed schemas:
//   seed 001: rows[] with shape{batch,length,width}, architecture, backend, ...
//   seed 000: cases[] with batch, length, config.width and rows[] as in 001;
//   seed 004: results[] with impl, mode, shape{batch,seq,dim,state},
//             median_ms / q1_ms / q3_ms (or an error, or a memory probe).
// Imported rows are external facts: operators and variants are kept as given
// strings and never checked against ours; the caller stores them without a
// selection. Parsing goes through google.protobuf.Struct (no new dependency).
// Pure functions, no state: thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/scantune.pb.h"

namespace scantune {

// Larger imports are refused with RESOURCE_EXHAUSTED before parsing.
inline constexpr size_t kMaxImportJsonBytes = 16u << 20;
// Warnings beyond this many are summarized in one line.
inline constexpr int kMaxImportWarnings = 50;

// The JSON document (seed 001 schema plus our fields) for these records.
StatusOr<std::string> RecordsToSeedJson(const std::vector<v1::Record>& records);

struct ImportedRecords {
  std::vector<v1::Record> records;  // origin "imported", ids unset
  int skipped = 0;
  std::vector<std::string> warnings;
};

// Parses a document of any known schema. INVALID_ARGUMENT (naming the
// position or the field) for malformed JSON or an unknown layout;
// RESOURCE_EXHAUSTED beyond kMaxImportJsonBytes. Rows that cannot be read
// are skipped with a warning rather than failing the whole import.
StatusOr<ImportedRecords> RecordsFromSeedJson(const std::string& json, const std::string& source_name);

}  // namespace scantune
