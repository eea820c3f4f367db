#include "server/tuner.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>

#include "common/log.h"
#include "compiler/kernel_sources.h"
#include "server/selector.h"

#ifndef SCANTUNE_VERSION
#define SCANTUNE_VERSION "unknown"
#endif

namespace scantune {
namespace {

// NVRTC logs can be long; a record keeps the start, where the first error is.
constexpr size_t kMaxDetailBytes = 16 * 1024;

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

uint64_t FreshSeed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}

v1::TuneProgress Progress(uint64_t job_id, v1::TuneProgress::Stage stage) {
  v1::TuneProgress p;
  p.set_job_id(job_id);
  p.set_stage(stage);
  return p;
}

int ComplexityOf(const std::string& name) {
  StatusOr<Variant> v = Variant::Parse(name);
  return v.ok() ? v->Complexity() : 1000;
}

}  // namespace

void FinishRecord(const TuneDevice& device, const Problem& problem, uint64_t job_id, const std::string& origin,
                  v1::Record* record) {
  // The daemon's view of the device, so that a record's fingerprint is the
  // one the daemon computes for the device (FingerprintOf == TuneDevice::fingerprint).
  *record->mutable_device() = device.info;
  if (!record->has_problem() || record->problem().op().empty()) *record->mutable_problem() = ToProto(problem);
  record->set_source_hash(SourceHash());
  record->set_daemon_version(SCANTUNE_VERSION);
  if (record->created_at().empty()) record->set_created_at(NowIso());
  record->set_job_id(job_id);
  record->set_origin(origin);
  if (record->bytes_moved() == 0) record->set_bytes_moved(FloorBytes(problem, problem.mode));
  if (record->parameters() == 0) record->set_parameters(ParameterCount(problem));
  const double median = RankedStats(*record, ToProto(problem.mode)).median_ms();
  if (record->state() == v1::OK && record->gbps() == 0.0 && median > 0.0) {
    record->set_gbps(static_cast<double>(record->bytes_moved()) / (median * 1e-3) / 1e9);
  }
  if (record->state() == v1::OK && record->pct_of_copy() == 0.0 && device.info.copy_gbps() > 0.0) {
    record->set_pct_of_copy(record->gbps() / device.info.copy_gbps() * 100.0);
  }
}

StatusOr<std::vector<v1::Record>> Tuner::RunWorkerJob(const TuneDevice& device, const Problem& problem, v1::Job job,
                                                      v1::TuneProgress::Stage verify_stage,
                                                      v1::TuneProgress::Stage time_stage,
                                                      const ProgressFn& progress) {
  const int total = job.candidates_size();
  int done = 0;
  const v1::Mode mode = ToProto(problem.mode);
  auto on_event = [&](const v1::WorkerEvent& event) {
    if (!progress) return;
    v1::TuneProgress p;
    p.set_job_id(job.job_id());
    p.set_total(total);
    if (event.has_started()) {
      p.set_stage(event.started().phase() == "time" ? time_stage : verify_stage);
      p.set_variant(event.started().variant());
      p.set_message(event.started().phase());
    } else if (event.has_record()) {
      ++done;
      const v1::Record& r = event.record();
      p.set_stage(r.state() == v1::OK && job.time() ? time_stage : verify_stage);
      p.set_variant(r.variant());
      p.set_state(r.state());
      p.set_median_ms(RankedStats(r, mode).median_ms());
      if (r.state() != v1::OK) p.set_message(r.detail());
    } else {
      return;
    }
    p.set_done(done);
    progress(p);
  };
  std::map<std::string, double> compile_ms;
  for (const v1::Candidate& c : job.candidates()) compile_ms[c.variant()] = c.compile_ms();
  ASSIGN_OR_RETURN(std::vector<v1::Record> records, pool_->RunJob(device.index, job, on_event));
  for (v1::Record& r : records) {
    if (r.compile_ms() == 0.0) r.set_compile_ms(compile_ms[r.variant()]);
    FinishRecord(device, problem, job.job_id(), job.origin(), &r);
    r.set_seed(job.seed());
  }
  return records;
}

StatusOr<Tuner::Evaluated> Tuner::Evaluate(uint64_t job_id, const TuneDevice& device, const Problem& problem,
                                           const std::vector<Variant>& variants, const std::string& origin,
                                           const v1::TimingConfig& timing, uint64_t seed,
                                           const ProgressFn& progress) {
  auto log = Logger("server");
  const int n = static_cast<int>(variants.size());
  if (progress) {
    v1::TuneProgress p = Progress(job_id, v1::TuneProgress::COMPILING);
    p.set_total(n);
    progress(p);
  }
  std::vector<CompileRequest> requests;
  for (const Variant& v : variants) {
    requests.push_back(
        {v, problem.op, problem.dtype, problem.ssm, device.info.cc_major(), device.info.cc_minor(), problem.shape});
  }
  std::vector<StatusOr<CompileResult>> compiled = cache_->CompileAll(requests, options_.compile_threads);
  const DeviceLimits limits = DeviceLimits::FromProto(device.info);

  Evaluated out;
  v1::Job job;
  job.set_job_id(job_id);
  *job.mutable_problem() = ToProto(problem);
  *job.mutable_timing() = timing;
  job.set_seed(seed != 0 ? seed : FreshSeed());
  job.set_verify(true);
  job.set_time(true);
  job.set_origin(origin);
  std::vector<std::optional<v1::Record>> slots(variants.size());
  int compile_failures = 0;
  for (size_t i = 0; i < variants.size(); ++i) {
    const std::string name = variants[i].Name();
    if (!compiled[i].ok()) return compiled[i].status().Annotate("compiler unusable while compiling " + name);
    const CompileResult& result = *compiled[i];
    v1::ResultState state = result.state;
    std::string detail;
    if (state == v1::OK) {
      StatusOr<v1::Candidate> candidate = MakeCandidate(variants[i], problem, limits, result);
      if (candidate.ok()) {
        out.candidates[name] = *candidate;
        *job.add_candidates() = std::move(*candidate);
        continue;
      }
      state = v1::COMPILE_FAILED;
      detail = candidate.status().message();
    } else {
      if (state != v1::COMPILE_TIMEOUT) state = v1::COMPILE_FAILED;
      detail = result.log.substr(0, kMaxDetailBytes);
      if (detail.empty()) detail = "NVRTC gave no log";
    }
    v1::Record record;
    record.set_variant(name);
    record.set_state(state);
    record.set_detail(detail);
    record.set_compile_ms(result.compile_ms);
    FinishRecord(device, problem, job_id, origin, &record);
    ++compile_failures;
    if (progress) {
      v1::TuneProgress p = Progress(job_id, v1::TuneProgress::COMPILING);
      p.set_total(n);
      p.set_variant(name);
      p.set_state(state);
      progress(p);
    }
    slots[i] = std::move(record);
  }
  if (progress) {
    v1::TuneProgress p = Progress(job_id, v1::TuneProgress::COMPILING);
    p.set_done(n);
    p.set_total(n);
    p.set_message(std::to_string(n - compile_failures) + " compiled, " + std::to_string(compile_failures) + " failed");
    progress(p);
  }
  std::vector<v1::Record> worker_records;
  if (job.candidates_size() > 0) {
    StatusOr<std::vector<v1::Record>> ran =
        RunWorkerJob(device, problem, job, v1::TuneProgress::VERIFYING, v1::TuneProgress::TIMING, progress);
    if (!ran.ok()) {
      // Compile failures are results too: keep them even when the device fails.
      std::vector<v1::Record> kept;
      for (auto& slot : slots) {
        if (slot) kept.push_back(*slot);
      }
      if (!kept.empty()) {
        StatusOr<std::vector<int64_t>> ids = store_->CommitResults(kept, std::nullopt, -1);
        if (!ids.ok()) log->warn("job {}: storing compile failures failed: {}", job_id, ids.status().ToString());
      }
      return ran.status();
    }
    worker_records = std::move(*ran);
  }
  std::map<std::string, v1::Record> by_name;
  for (v1::Record& r : worker_records) by_name[r.variant()] = std::move(r);
  for (size_t i = 0; i < variants.size(); ++i) {
    if (slots[i]) {
      out.records.push_back(std::move(*slots[i]));
    } else if (auto it = by_name.find(variants[i].Name()); it != by_name.end()) {
      out.records.push_back(std::move(it->second));
    }
  }
  return out;
}

StatusOr<v1::Selection> Tuner::Tune(uint64_t job_id, const TuneDevice& device, const Problem& problem,
                                    const std::vector<Variant>& variants, bool force, const ProgressFn& progress) {
  auto log = Logger("server");
  auto fail = [&](const Status& status) -> Status {
    if (progress) {
      v1::TuneProgress p = Progress(job_id, v1::TuneProgress::FAILED);
      p.set_message(status.message());
      progress(p);
    }
    log->warn("job {}: tune {} failed: {}", job_id, problem.Key(), status.ToString());
    return status;
  };
  const std::string& model = device.info.name();
  const v1::Mode mode = ToProto(problem.mode);

  if (!force) {
    // Another job may have tuned this problem while this one waited in the queue.
    StatusOr<v1::Selection> existing = Selector(store_).Find(model, device.fingerprint, problem, v1::NOT_FOUND);
    if (existing.ok() && !existing->stale()) {
      if (progress) {
        v1::TuneProgress p = Progress(job_id, v1::TuneProgress::DONE);
        *p.mutable_selection() = *existing;
        p.set_message("a fresh selection exists; not re-tuned (force re-tunes)");
        progress(p);
      }
      return *existing;
    }
  }

  const DeviceLimits limits = DeviceLimits::FromProto(device.info);
  std::vector<Variant> feasible;
  std::vector<Variant> all = variants.empty() ? EnumerateVariants(problem.op, options_.enable_test_variants)
                                              : variants;
  // A forced tune of named variants: the fresh selections (ordinary and deterministic) join them where absent,
  // so that they are timed beside them and a narrower list cannot replace a faster selection with a slower one.
  std::string incumbent_note;
  if (force && !variants.empty()) {
    for (bool deterministic : {false, true}) {
      StatusOr<v1::Selection> held =
          Selector(store_).Find(model, device.fingerprint, problem, v1::NOT_FOUND, deterministic);
      if (!held.ok() || held->stale() || held->nearest()) continue;
      StatusOr<Variant> v = Variant::Parse(held->variant());
      if (!v.ok() || std::find(all.begin(), all.end(), *v) != all.end()) continue;
      all.push_back(*v);
      incumbent_note += (incumbent_note.empty() ? "" : ", ") + held->variant();
    }
    if (!incumbent_note.empty()) {
      incumbent_note = "the fresh selection(s) " + incumbent_note + " timed beside the named variants";
    }
  }
  int pruned = 0;
  for (const Variant& v : all) {
    if (CanImplement(v, problem, limits).ok()) {
      feasible.push_back(v);
    } else {
      ++pruned;
    }
  }
  std::string skipped_note;
  if (!force) {
    StatusOr<std::vector<v1::Record>> failed = store_->FailedRecords(model, problem, device.fingerprint);
    if (!failed.ok()) return fail(failed.status().Annotate("reading failure records"));
    std::set<std::string> failed_names;
    for (const v1::Record& r : *failed) failed_names.insert(r.variant());
    const size_t before = feasible.size();
    feasible.erase(std::remove_if(feasible.begin(), feasible.end(),
                                  [&](const Variant& v) { return failed_names.count(v.Name()) > 0; }),
                   feasible.end());
    if (feasible.size() != before) {
      skipped_note = std::to_string(before - feasible.size()) +
                     " variant(s) skipped: they have failure records under this fingerprint (force retries them)";
    }
  }
  log->info("job {}: tuning {} on {}: {} candidate(s), {} pruned{}{}{}{}", job_id, problem.Key(), model,
            feasible.size(), pruned, skipped_note.empty() ? "" : "; ", skipped_note,
            incumbent_note.empty() ? "" : "; ", incumbent_note);
  for (const std::string* note : {&skipped_note, &incumbent_note}) {
    if (!progress || note->empty()) continue;
    v1::TuneProgress p = Progress(job_id, v1::TuneProgress::COMPILING);
    p.set_message(*note);
    progress(p);
  }
  if (feasible.empty()) {
    return fail(FailedPrecondition("no variant left to tune for " + problem.Key() + " (" + std::to_string(pruned) +
                                   " cannot implement it" + (skipped_note.empty() ? "" : "; " + skipped_note) + ")"));
  }

  StatusOr<Evaluated> first =
      Evaluate(job_id, device, problem, feasible, "tuned", options_.timing, /*seed=*/0, progress);
  if (!first.ok()) return fail(first.status());
  std::vector<v1::Record> records = std::move(first->records);

  // Rank the legal ones by the median of the problem's mode.
  std::vector<int> legal;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].state() == v1::OK && RankedStats(records[i], mode).median_ms() > 0) legal.push_back(static_cast<int>(i));
  }
  std::sort(legal.begin(), legal.end(), [&](int a, int b) {
    const double ma = RankedStats(records[a], mode).median_ms(), mb = RankedStats(records[b], mode).median_ms();
    return ma != mb ? ma < mb : records[a].variant() < records[b].variant();
  });

  // The deterministic ones (every output the same bits on every run) get
  // their own selection, decided the same way among them alone.
  auto deterministic = [&](int i) {
    StatusOr<Variant> v = Variant::Parse(records[i].variant());
    return v.ok() && Deterministic(*v, problem);
  };
  std::vector<int> legal_deterministic;
  for (int i : legal) {
    if (deterministic(i)) legal_deterministic.push_back(i);
  }
  // The re-timed: the top few of all, and the top few deterministic ones where
  // those are not among them (the fastest first, as `legal`).
  std::vector<int> retimed_of = legal;
  retimed_of.resize(std::min<size_t>(options_.retime_top, legal.size()));
  for (size_t k = 0; k < legal_deterministic.size() && k < static_cast<size_t>(options_.retime_top); ++k) {
    if (std::find(retimed_of.begin(), retimed_of.end(), legal_deterministic[k]) == retimed_of.end()) {
      retimed_of.push_back(legal_deterministic[k]);
    }
  }

  // The field the decision is made over: the re-timed top few when re-timing
  // worked, else the first pass.
  std::vector<int> field = legal;
  std::set<std::string> retime_failed;  // re-timed variants whose re-timing was not OK
  const int top = static_cast<int>(retimed_of.size());
  if (top >= 2) {
    v1::Job retime;
    retime.set_job_id(job_id);
    *retime.mutable_problem() = ToProto(problem);
    *retime.mutable_timing() = options_.timing;
    const int rounds = options_.timing.rounds() > 0 ? options_.timing.rounds() : 2;
    retime.mutable_timing()->set_rounds(std::max(2 * rounds, 4));
    retime.set_seed(FreshSeed());
    retime.set_verify(false);  // verified in the first pass
    retime.set_time(true);
    retime.set_origin("retime");
    for (int i : retimed_of) *retime.add_candidates() = first->candidates[records[i].variant()];
    if (progress) {
      v1::TuneProgress p = Progress(job_id, v1::TuneProgress::RETIMING);
      p.set_total(top);
      p.set_message("re-timing the top " + std::to_string(top) + " in paired order");
      progress(p);
    }
    StatusOr<std::vector<v1::Record>> retimed = RunWorkerJob(device, problem, retime, v1::TuneProgress::RETIMING,
                                                             v1::TuneProgress::RETIMING, progress);
    if (retimed.ok()) {
      field.clear();
      for (v1::Record& r : *retimed) {
        // The re-timing pass does not verify; its legality and error are the
        // verification pass's, so carry that rel_err over instead of a 0.
        for (int i : retimed_of) {
          if (records[i].variant() == r.variant()) r.set_rel_err(records[i].rel_err());
        }
        records.push_back(std::move(r));
        const v1::Record& stored = records.back();
        if (stored.state() == v1::OK && RankedStats(stored, mode).median_ms() > 0) {
          field.push_back(static_cast<int>(records.size()) - 1);
        } else {
          retime_failed.insert(stored.variant());
        }
      }
      if (field.empty()) {
        // Every re-timed candidate failed this time: those are not legal after all.
        for (int i : retimed_of) retime_failed.insert(records[i].variant());
        for (int i : legal) {
          if (!retime_failed.count(records[i].variant())) field.push_back(i);
        }
      }
    } else {
      log->warn("job {}: re-timing failed ({}); deciding on the first pass", job_id, retimed.status().ToString());
      if (retimed.status().code() == StatusCode::kAborted) return fail(retimed.status());
    }
  }

  if (field.empty()) {
    std::map<std::string, int> states;
    for (const v1::Record& r : records) states[v1::ResultState_Name(r.state())]++;
    std::string summary;
    for (const auto& [state, count] : states) summary += (summary.empty() ? "" : ", ") + std::to_string(count) + " " + state;
    StatusOr<std::vector<int64_t>> ids = store_->CommitResults(records, std::nullopt, -1);
    if (!ids.ok()) return fail(ids.status().Annotate("storing records"));
    return fail(FailedPrecondition("no legal variant for " + problem.Key() + " on " + model + " (" + summary +
                                   "); records stored"));
  }

  // The selection decided over `among` (indices into records).
  auto decide = [&](const std::vector<int>& among, bool of_deterministic) {
    std::vector<RankedCandidate> ranked;
    for (int i : among) {
      const v1::Stats& s = RankedStats(records[i], mode);
      ranked.push_back({records[i].variant(), ComplexityOf(records[i].variant()), s.median_ms(), s.mad_ms()});
    }
    const Decision decision = Decide(ranked);
    SelectionUpdate update;
    update.winner_index = among[decision.winner];
    const v1::Record& winner = records[update.winner_index];
    v1::Selection& selection = update.selection;
    selection.set_device_model(model);
    *selection.mutable_problem() = ToProto(problem);
    selection.set_variant(winner.variant());
    selection.set_median_ms(RankedStats(winner, mode).median_ms());
    selection.set_stale(false);
    selection.set_nearest(false);
    *selection.mutable_tuned_shape() = selection.problem().shape();
    if (decision.runner_up >= 0) selection.set_runner_up(ranked[decision.runner_up].variant);
    selection.set_margin_pct(decision.margin_pct);
    selection.set_decided_by(decision.decided_by);
    selection.set_updated_at(NowIso());
    selection.set_fingerprint(device.fingerprint);
    selection.set_deterministic(of_deterministic);
    return update;
  };
  std::vector<SelectionUpdate> updates = {decide(field, false)};
  std::vector<int> field_deterministic;
  for (int i : field) {
    if (deterministic(i)) field_deterministic.push_back(i);
  }
  if (field_deterministic.empty()) {
    // The re-timed deterministic ones all failed there while others passed:
    // decide among the first pass's deterministic ones that did not fail it.
    for (int i : legal_deterministic) {
      if (!retime_failed.count(records[i].variant())) field_deterministic.push_back(i);
    }
  }
  if (!field_deterministic.empty()) updates.push_back(decide(field_deterministic, true));

  StatusOr<std::vector<int64_t>> ids = store_->CommitResults(records, updates);
  if (!ids.ok()) return fail(ids.status().Annotate("committing results"));
  for (SelectionUpdate& u : updates) u.selection.set_record_id((*ids)[u.winner_index]);
  const v1::Selection& selection = updates[0].selection;
  log->info("job {}: {} on {} -> {} ({:.4f} ms, {}, margin {:.2f}% over {})", job_id, problem.Key(), model,
            selection.variant(), selection.median_ms(), selection.decided_by(), selection.margin_pct(),
            selection.runner_up().empty() ? "-" : selection.runner_up());
  std::string deterministic_note = "no deterministic variant is legal here";
  if (updates.size() > 1) {
    const v1::Selection& d = updates[1].selection;
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.4f", d.median_ms());
    deterministic_note = "deterministic selection: " + d.variant() + " (" + ms + " ms, " + d.decided_by() + ")";
    log->info("job {}: {} on {} -> deterministic {} ({:.4f} ms, {})", job_id, problem.Key(), model, d.variant(),
              d.median_ms(), d.decided_by());
  }
  if (progress) {
    v1::TuneProgress p = Progress(job_id, v1::TuneProgress::DONE);
    p.set_message(deterministic_note);
    p.set_done(static_cast<int>(records.size()));
    p.set_total(static_cast<int>(records.size()));
    p.set_variant(selection.variant());
    p.set_state(v1::OK);
    p.set_median_ms(selection.median_ms());
    *p.mutable_selection() = selection;
    progress(p);
  }
  return selection;
}

StatusOr<std::vector<v1::Record>> Tuner::Benchmark(uint64_t job_id, const TuneDevice& device,
                                                   const std::vector<Problem>& problems,
                                                   const std::vector<Variant>& variants, uint64_t seed) {
  std::vector<v1::Record> records;
  Status failure;
  for (const Problem& problem : problems) {
    StatusOr<Evaluated> evaluated =
        Evaluate(job_id, device, problem, variants, "benchmark", options_.timing, seed, nullptr);
    if (!evaluated.ok()) {
      failure = evaluated.status().Annotate("benchmark of " + problem.Key());
      break;
    }
    for (v1::Record& r : evaluated->records) records.push_back(std::move(r));
  }
  if (!records.empty()) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, store_->CommitResults(records, std::nullopt, -1));
    for (size_t i = 0; i < records.size(); ++i) records[i].set_id(ids[i]);
  }
  if (!failure.ok()) return failure;
  return records;
}

}  // namespace scantune
