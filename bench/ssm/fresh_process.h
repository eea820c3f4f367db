// Fresh-process measurements: the parent writes a v1::Candidate to a file and
// runs this binary again with --child; the child opens its own context,
// runs the candidate once (direct_run.h) and writes a v1::Record with the
// state and the device memory it saw (memory.baseline/peak/delta). A fresh
// process is the only honest baseline for device memory: nothing of the
// parent's context, modules or allocator is in it.
//
// Thread safety: RunChild may be called from one thread at a time (the
// children share the GPU); ChildMain once per process.
#pragma once

#include <string>

#include "bench/ssm/options.h"
#include "bench/ssm/report.h"
#include "common/status.h"
#include "proto/scantune.pb.h"
#include "proto/worker.pb.h"

namespace scantune::ssmbench {

// This executable (/proc/self/exe); empty if it cannot be read.
std::string SelfExe();

// Runs `exe --child ...` for the candidate on the shape and waits for it
// (killed after options.child_timeout_s). Whatever happens to the child, the
// answer is a record: its own, or one that says how it ended (TIMEOUT, or
// STATE_UNSPECIFIED with the exit code or signal). A Status error only when
// the child could not be started. Files go to `dir` (`index` names them).
StatusOr<v1::Record> RunChild(const SsmOptions& options, const std::string& exe, const std::string& dir, int index,
                              const v1::Candidate& candidate, const SsmShape& shape, Mode mode);

// "OUT_OF_MEMORY: <detail>" ("ERROR: ..." for STATE_UNSPECIFIED).
std::string FailureText(const v1::Record& record);

// --child: loads options.candidate_file, measures, writes the record to
// options.child_out. Exit code 0 when the record was written.
int ChildMain(const SsmOptions& options);

}  // namespace scantune::ssmbench
