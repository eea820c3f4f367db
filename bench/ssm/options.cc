#include "bench/ssm/options.h"

#include <cerrno>
#include <sstream>

#include "bench/common/bench_files.h"
#include "bench/common/bench_flags.h"
#include "client/arg_parser.h"

namespace scantune::ssmbench {
namespace {

using bench::DoubleFlag;
using bench::IntFlag;

ArgParser MakeParser() {
  ArgParser p;
  p.AddFlag("socket", "ADDR", "daemon address, unix:PATH or unix:///PATH (default $SCANTUNE_ADDRESS, else unix:///tmp/scantune.sock)");
  p.AddFlag("address", "ADDR", "same as --socket");
  p.AddFlag("shapes", "BxLxD,...", "timing shapes (default the 9 of D in {256,512,1024} x L in {512,2048,8192}, B = 4)");
  p.AddFlag("modes", "M,...", "modes, fwd and/or fwd_bwd (default fwd,fwd_bwd)");
  p.AddFlag("state", "N", "state size N (default 16)");
  p.AddFlag("out", "FILE", "JSON results in seed 004's schema (default ssm_bench.json)");
  p.AddFlag("seed-file", "FILE", "seed 004 JSON for the reference ordering (default: looked up)");
  p.AddFlag("device", "N", "CUDA device ordinal (default 0)");
  p.AddFlag("seed", "N", "random-input seed of the direct runs (default 1)");
  p.AddBool("no-tune", "do not Tune: use the newest stored job of each problem");
  p.AddBool("no-rel-err", "skip the rel_err_vs_scan runs");
  p.AddFlag("peak-shapes", "BxLxD,...|none", "device_peak shapes, one fresh process per family x mode (default 4x2048x512,4x8192x512 as seed 004)");
  p.AddBool("no-max-len", "skip the max_len search");
  p.AddBool("max-len-all", "max_len for every family (default: the best fwd_bwd family only)");
  p.AddFlag("max-len-start", "L", "first power-of-two L of the max_len search (default 4096)");
  p.AddFlag("mem-cap-gb", "GIB", "max_len memory cap in GiB, 2^30 bytes (default 24, seed 004's RTX 3090)");
  p.AddFlag("child-timeout-s", "S", "a fresh-process measurement still running after this is killed (default 300)");
  p.AddFlag("kernel-timeout-ms", "MS", "a phase of a direct run still running after this fails (default 60000)");
  p.AddFlag("deadline-s", "S", "past this many seconds, skip what is left (its rows say so) and write the JSON (default: none)");
  p.AddFlag("work-dir", "DIR", "candidates and child results (default a fresh directory under /tmp)");
  p.AddBool("dry-run", "no GPU and no daemon: synthetic records through the same selection, JSON writer and table");
  p.AddBool("help", "this text");
  // Internal: the fresh process of one device_peak / max_len point.
  p.AddBool("child", "internal: measure one candidate's device memory in this fresh process");
  p.AddFlag("candidate", "FILE", "internal (--child): serialized v1::Candidate");
  p.AddFlag("child-out", "FILE", "internal (--child): where the v1::Record goes");
  p.AddFlag("shape", "BxLxD", "internal (--child): the problem's shape");
  p.AddFlag("mode", "MODE", "internal (--child): fwd or fwd_bwd");
  return p;
}

}  // namespace

std::vector<SsmShape> DefaultShapes(int64_t state) {
  std::vector<SsmShape> shapes;
  for (int64_t dim : {256, 512, 1024}) {
    for (int64_t seq : {512, 2048, 8192}) shapes.push_back({4, seq, dim, state});
  }
  return shapes;
}

StatusOr<std::vector<SsmShape>> ParseShapeList(const std::string& text, int64_t state) {
  std::vector<SsmShape> shapes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    auto shape = ParseShape(item);
    if (!shape.ok()) return shape.status().Annotate("shape '" + item + "'");
    if (shape->batch < 1 || shape->length < 1 || shape->width < 1) {
      return InvalidArgument("shape '" + item + "' has a dimension below 1");
    }
    shapes.push_back({shape->batch, shape->length, shape->width, state});
  }
  if (shapes.empty()) return InvalidArgument("shape list '" + text + "' names no shape");
  return shapes;
}

StatusOr<SsmOptions> ParseOptions(const std::vector<std::string>& args) {
  ArgParser p = MakeParser();
  RETURN_IF_ERROR(p.Parse(args));
  SsmOptions o;
  o.help = p.GetBool("help");
  if (p.Has("socket") && p.Has("address") && p.GetOr("socket", "") != p.GetOr("address", "")) {
    return InvalidArgument("--socket and --address disagree");
  }
  o.address = p.GetOr("socket", p.GetOr("address", ""));
  ASSIGN_OR_RETURN(o.state, IntFlag(p, "state", o.state, 1, 64));
  if (o.state != 8 && o.state != 16 && o.state != 32 && o.state != 64) {
    return InvalidArgument("--state must be 8, 16, 32 or 64");
  }
  if (auto shapes = p.Get("shapes")) {
    ASSIGN_OR_RETURN(o.shapes, ParseShapeList(*shapes, o.state));
  } else {
    o.shapes = DefaultShapes(o.state);
  }
  if (auto modes = p.Get("modes")) {
    o.modes.clear();
    std::stringstream in(*modes);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (item.empty()) continue;
      ASSIGN_OR_RETURN(Mode m, ParseMode(item));
      if (m == Mode::kBwd) return InvalidArgument("--modes: seed 004 has fwd and fwd_bwd only");
      o.modes.push_back(m);
    }
    if (o.modes.empty()) return InvalidArgument("--modes names no mode");
  }
  o.out = p.GetOr("out", o.out);
  if (o.out.empty()) return InvalidArgument("--out needs a file name");
  o.seed_file = p.GetOr("seed-file", "");
  ASSIGN_OR_RETURN(int64_t device, IntFlag(p, "device", o.device, 0, 1024));
  ASSIGN_OR_RETURN(int64_t seed, IntFlag(p, "seed", static_cast<int64_t>(o.seed), 0, INT64_MAX));
  o.device = static_cast<int>(device);
  o.seed = static_cast<uint64_t>(seed);
  o.tune = !p.GetBool("no-tune");
  o.rel_err = !p.GetBool("no-rel-err");
  const std::string peak = p.GetOr("peak-shapes", "4x2048x512,4x8192x512");
  if (peak != "none") {
    ASSIGN_OR_RETURN(o.peak_shapes, ParseShapeList(peak, o.state));
  }
  o.max_len = !p.GetBool("no-max-len");
  o.max_len_all = p.GetBool("max-len-all");
  ASSIGN_OR_RETURN(o.max_len_start, IntFlag(p, "max-len-start", o.max_len_start, 1, int64_t{1} << 30));
  if ((o.max_len_start & (o.max_len_start - 1)) != 0) return InvalidArgument("--max-len-start must be a power of two");
  ASSIGN_OR_RETURN(o.mem_cap_gib, DoubleFlag(p, "mem-cap-gb", o.mem_cap_gib, 0.0, 1e6));
  ASSIGN_OR_RETURN(o.child_timeout_s, DoubleFlag(p, "child-timeout-s", o.child_timeout_s, 0.0, 86400.0));
  ASSIGN_OR_RETURN(o.kernel_timeout_ms, DoubleFlag(p, "kernel-timeout-ms", o.kernel_timeout_ms, 0.0, 3.6e6));
  if (p.Has("deadline-s")) {
    ASSIGN_OR_RETURN(o.deadline_s, DoubleFlag(p, "deadline-s", 0.0, 0.0, 86400.0));
  }
  o.work_dir = p.GetOr("work-dir", "");
  o.dry_run = p.GetBool("dry-run");

  o.child = p.GetBool("child");
  if (o.child) {
    o.candidate_file = p.GetOr("candidate", "");
    o.child_out = p.GetOr("child-out", "");
    if (o.candidate_file.empty() || o.child_out.empty() || !p.Has("shape") || !p.Has("mode")) {
      return InvalidArgument("--child needs --candidate, --child-out, --shape and --mode");
    }
    ASSIGN_OR_RETURN(auto shapes, ParseShapeList(p.GetOr("shape", ""), o.state));
    if (shapes.size() != 1) return InvalidArgument("--shape takes one shape");
    o.child_shape = shapes[0];
    ASSIGN_OR_RETURN(o.child_mode, ParseMode(p.GetOr("mode", "")));
  } else if (p.Has("candidate") || p.Has("child-out") || p.Has("shape") || p.Has("mode")) {
    return InvalidArgument("--candidate, --child-out, --shape and --mode belong to --child");
  }
  return o;
}

std::string Usage() {
  return "usage: scantune-ssm-bench [flags]\n\n"
         "Seed 004's Mamba selective-scan table on this GPU: per shape and mode, each variant family's best\n"
         "(the daemon's Tune records), rel_err vs the sequential family, device_peak rows from fresh\n"
         "processes and the max_len row; writes seed 004's JSON schema and prints the table beside seed\n"
         "004's ordering, DEVICE.md's reference and the floor.\n\n" +
         MakeParser().Help();
}

std::string DefaultSeedFile() { return bench::FindSeedFile("004", "SCANTUNE_SEED_004"); }

}  // namespace scantune::ssmbench
