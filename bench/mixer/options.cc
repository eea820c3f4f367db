#include "bench/mixer/options.h"

#include <cstdlib>
#include <sstream>

#include "bench/common/bench_files.h"
#include "bench/common/bench_flags.h"
#include "client/arg_parser.h"
#include "common/problem.h"

namespace scantune::mixer {
namespace {

using bench::IntFlag;

ArgParser MakeParser() {
  ArgParser p;
  p.AddFlag("socket", "ADDR", "daemon address, unix:PATH or unix:///PATH (default $SCANTUNE_ADDRESS, else unix:///tmp/scantune.sock)");
  p.AddFlag("address", "ADDR", "same as --socket");
  p.AddFlag("shapes", "BxLxW,...", "shapes (default the seed-001 four: 4x2048x2048,1x8192x2560,1x32768x1024,1x32768x2048)");
  p.AddFlag("out", "FILE", "JSON results in seed 001's schema (default mixer_bench.json)");
  p.AddFlag("seed-file", "FILE", "seed 001 JSON for the reference ratios (default: looked up)");
  p.AddFlag("rounds", "N", "counterbalanced rounds, AB then BA (default 2)");
  p.AddFlag("samples", "N", "samples per mode per round (default 5)");
  p.AddFlag("warmup", "N", "warm-up launches per mode before each stint (default 3)");
  p.AddFlag("target-ms", "MS", "inner loop sized so one sample lasts at least this (default 1.0)");
  p.AddFlag("max-inner", "N", "at most this many launches per sample (default 1000)");
  p.AddFlag("heads", "H", "heads of the block-diagonal gate projections (default 16)");
  p.AddFlag("device", "N", "CUDA device ordinal (default 0)");
  p.AddFlag("seed", "N", "random-input seed (default 1)");
  p.AddBool("tune-now", "ask Select with the TUNE_NOW policy when a shape was never tuned (waits for the tuning)");
  p.AddBool("dry-run", "no GPU and no daemon: synthetic timings through the same JSON writer and table");
  p.AddBool("help", "this text");
  return p;
}

}  // namespace

std::vector<ShapeKey> Seed001Shapes() { return {{4, 2048, 2048}, {1, 8192, 2560}, {1, 32768, 1024}, {1, 32768, 2048}}; }

StatusOr<std::vector<ShapeKey>> ParseShapeList(const std::string& text) {
  std::vector<ShapeKey> shapes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    auto shape = ParseShape(item);
    if (!shape.ok()) return shape.status().Annotate("--shapes entry '" + item + "'");
    if (shape->batch < 1 || shape->length < 1 || shape->width < 1) {
      return InvalidArgument("--shapes entry '" + item + "' has a dimension below 1");
    }
    shapes.push_back({shape->batch, shape->length, shape->width});
  }
  if (shapes.empty()) return InvalidArgument("--shapes names no shape");
  return shapes;
}

StatusOr<MixerOptions> ParseOptions(const std::vector<std::string>& args) {
  ArgParser p = MakeParser();
  RETURN_IF_ERROR(p.Parse(args));
  MixerOptions o;
  o.help = p.GetBool("help");
  if (p.Has("socket") && p.Has("address") && p.GetOr("socket", "") != p.GetOr("address", "")) {
    return InvalidArgument("--socket and --address disagree");
  }
  o.address = p.GetOr("socket", p.GetOr("address", ""));
  if (auto shapes = p.Get("shapes")) {
    ASSIGN_OR_RETURN(o.shapes, ParseShapeList(*shapes));
  } else {
    o.shapes = Seed001Shapes();
  }
  o.out = p.GetOr("out", o.out);
  if (o.out.empty()) return InvalidArgument("--out needs a file name");
  o.seed_file = p.GetOr("seed-file", "");
  ASSIGN_OR_RETURN(int64_t rounds, IntFlag(p, "rounds", o.rounds, 1, 100));
  ASSIGN_OR_RETURN(int64_t samples, IntFlag(p, "samples", o.samples, 1, 1000));
  ASSIGN_OR_RETURN(int64_t warmup, IntFlag(p, "warmup", o.warmup, 0, 1000));
  ASSIGN_OR_RETURN(int64_t max_inner, IntFlag(p, "max-inner", o.max_inner, 1, 1000000));
  ASSIGN_OR_RETURN(int64_t heads, IntFlag(p, "heads", o.heads, 1, 4096));
  ASSIGN_OR_RETURN(int64_t device, IntFlag(p, "device", o.device, 0, 1024));
  ASSIGN_OR_RETURN(int64_t seed, IntFlag(p, "seed", static_cast<int64_t>(o.seed), 0, INT64_MAX));
  o.rounds = static_cast<int>(rounds);
  o.samples = static_cast<int>(samples);
  o.warmup = static_cast<int>(warmup);
  o.max_inner = static_cast<int>(max_inner);
  o.heads = static_cast<int>(heads);
  o.device = static_cast<int>(device);
  o.seed = static_cast<uint64_t>(seed);
  if (auto t = p.Get("target-ms")) {
    char* end = nullptr;
    const double v = std::strtod(t->c_str(), &end);
    if (t->empty() || *end != '\0' || !(v > 0.0) || v > 10000.0) {
      return InvalidArgument("--target-ms must be a number in (0, 10000], got '" + *t + "'");
    }
    o.target_ms = v;
  }
  o.tune_now = p.GetBool("tune-now");
  o.dry_run = p.GetBool("dry-run");
  for (const ShapeKey& s : o.shapes) {
    if (s.width % o.heads != 0) {
      return InvalidArgument("shape " + s.ToString() + ": width is not a multiple of " + std::to_string(o.heads) +
                             " heads");
    }
  }
  return o;
}

std::string Usage() {
  return "usage: scantune-mixer-bench [flags]\n\n"
         "Times the RG-LRU mixer (block-diagonal gate GEMMs through cuBLAS + the selected rglru backend)\n"
         "against the SAMU mixer (the selected samu backend) at seed 001's shapes, bf16, fwd / bwd / fwd_bwd,\n"
         "and writes seed 001's JSON schema.\n\n" +
         MakeParser().Help();
}

std::string DefaultSeedFile() { return bench::FindSeedFile("001", "SCANTUNE_SEED_001"); }

}  // namespace scantune::mixer
