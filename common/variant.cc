#include "common/variant.h"

#include <charconv>
#include <functional>
#include <vector>

namespace scantune {
namespace {

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

// One knob as it appears in a name: a letter and a positive integer ("v4").
// An optional knob is left out of the name at its default 0; the knobs keep
// their order, so a name part is the next knob whose letter it starts with.
struct KnobSpec {
  char letter;
  int Variant::*field;
  bool optional = false;
};

std::vector<KnobSpec> KnobsOf(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kSequential:
      return {{'v', &Variant::vec}, {'t', &Variant::threads}, {'p', &Variant::prefetch}};
    case Algorithm::kChunked:
      return {{'v', &Variant::vec},
              {'t', &Variant::threads},
              {'c', &Variant::chunk},
              {'l', &Variant::strip, true},
              {'h', &Variant::save_every, true},
              {'y', &Variant::h_from_y, true},
              {'b', &Variant::fwd_blocks, true},
              {'i', &Variant::fwd_items, true},
              {'p', &Variant::blocks_per_sm, true},
              {'d', &Variant::chained, true},
              {'a', &Variant::atomic_sums, true},
              {'k', &Variant::baked, true}};
    case Algorithm::kLookback:
      return {{'v', &Variant::vec},
              {'t', &Variant::threads},
              {'s', &Variant::segments},
              {'i', &Variant::items},
              {'o', &Variant::order, true},
              {'d', &Variant::chained, true},
              {'k', &Variant::baked, true}};
    case Algorithm::kLookbackSmem:
      return {{'v', &Variant::vec},
              {'t', &Variant::threads},
              {'c', &Variant::strip},
              {'i', &Variant::tile},
              {'o', &Variant::order, true},
              {'d', &Variant::chained, true},
              {'k', &Variant::baked, true}};
    case Algorithm::kLookbackPipe:
      return {{'v', &Variant::vec},
              {'t', &Variant::threads},
              {'c', &Variant::strip},
              {'i', &Variant::tile},
              {'b', &Variant::blocks_per_sm}};
    case Algorithm::kFused:
      return {{'d', &Variant::dim_block}, {'s', &Variant::state_split}, {'c', &Variant::chunk}};
    case Algorithm::kFusedSeg:
      return {{'d', &Variant::dim_block}, {'s', &Variant::state_split}, {'c', &Variant::chunk},
              {'g', &Variant::segment}};
    case Algorithm::kTimeScan:
      return {{'d', &Variant::dim_block}, {'w', &Variant::segments}, {'i', &Variant::items},
              {'s', &Variant::state_split, true}, {'f', &Variant::fixed_sums, true}};
    case Algorithm::kTestFault:
    case Algorithm::kTestHang:
      return {};
  }
  return {};
}

}  // namespace

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kSequential: return "sequential";
    case Algorithm::kChunked: return "chunked";
    case Algorithm::kLookback: return "lookback";
    case Algorithm::kLookbackSmem: return "lookbacksmem";
    case Algorithm::kLookbackPipe: return "lookbackpipe";
    case Algorithm::kFused: return "fused";
    case Algorithm::kFusedSeg: return "fusedseg";
    case Algorithm::kTimeScan: return "tscan";
    case Algorithm::kTestFault: return "test_fault";
    case Algorithm::kTestHang: return "test_hang";
  }
  return "?";
}

std::string Variant::Name() const {
  std::string name = AlgorithmName(algorithm);
  for (const KnobSpec& knob : KnobsOf(algorithm)) {
    if (knob.optional && this->*knob.field == 0) continue;
    name += '_';
    name += knob.letter;
    name += std::to_string(this->*knob.field);
  }
  return name;
}

StatusOr<Variant> Variant::Parse(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("bad variant name '" + std::string(name) + "': " + why);
  };
  Variant v;
  if (name == "test_fault") {
    v.algorithm = Algorithm::kTestFault;
    return v;
  }
  if (name == "test_hang") {
    v.algorithm = Algorithm::kTestHang;
    return v;
  }
  std::vector<std::string_view> parts = Split(name, '_');
  const std::string_view algo = parts[0];
  if (algo == "sequential") {
    v.algorithm = Algorithm::kSequential;
  } else if (algo == "chunked") {
    v.algorithm = Algorithm::kChunked;
  } else if (algo == "lookback") {
    v.algorithm = Algorithm::kLookback;
  } else if (algo == "lookbacksmem") {
    v.algorithm = Algorithm::kLookbackSmem;
  } else if (algo == "lookbackpipe") {
    v.algorithm = Algorithm::kLookbackPipe;
  } else if (algo == "fused") {
    v.algorithm = Algorithm::kFused;
  } else if (algo == "fusedseg") {
    v.algorithm = Algorithm::kFusedSeg;
  } else if (algo == "tscan") {
    v.algorithm = Algorithm::kTimeScan;
  } else {
    return bad("unknown algorithm '" + std::string(algo) +
               "' (sequential, chunked, lookback, lookbacksmem, lookbackpipe, fused, fusedseg, tscan)");
  }
  const std::vector<KnobSpec> knobs = KnobsOf(v.algorithm);
  size_t required = 0;
  for (const KnobSpec& knob : knobs) required += knob.optional ? 0 : 1;
  const std::string count = required == knobs.size() ? std::to_string(required)
                            : std::to_string(required) + (knobs.size() - required == 1 ? " or " : " to ") +
                                  std::to_string(knobs.size());
  size_t next = 1;  // the next name part
  for (size_t i = 0; i < knobs.size(); ++i) {
    const bool present = next < parts.size() && !parts[next].empty() && parts[next][0] == knobs[i].letter;
    if (!present) {
      if (knobs[i].optional) continue;
      if (next >= parts.size()) return bad("expected " + count + " knobs after the algorithm");
      return bad(std::string("knob ") + std::to_string(next) + " must start with '" + knobs[i].letter + "'");
    }
    std::string_view part = parts[next++];
    int value = 0;
    auto [end, ec] = std::from_chars(part.data() + 1, part.data() + part.size(), value);
    if (part.size() < 2 || ec != std::errc() || end != part.data() + part.size() || value <= 0) {
      return bad("knob '" + std::string(part) + "' needs a positive integer");
    }
    v.*(knobs[i].field) = value;
  }
  if (next != parts.size()) {
    return bad("unexpected '" + std::string(parts[next]) + "' after the knobs (expected " + count + " knobs)");
  }
  return v;
}

int Variant::Complexity() const {
  switch (algorithm) {
    case Algorithm::kSequential: return 0;
    case Algorithm::kChunked: return 1;
    case Algorithm::kLookback: return 2;
    case Algorithm::kLookbackSmem: return 3;
    case Algorithm::kLookbackPipe: return 4;
    case Algorithm::kFused: return 3;
    case Algorithm::kFusedSeg: return 4;
    case Algorithm::kTimeScan: return 4;
    case Algorithm::kTestFault:
    case Algorithm::kTestHang: return 100;
  }
  return 100;
}

size_t VariantHash::operator()(const Variant& v) const {
  size_t h = std::hash<int>()(static_cast<int>(v.algorithm));
  for (int knob : {v.vec, v.threads, v.chunk, v.segments, v.items, v.prefetch, v.strip, v.tile, v.blocks_per_sm,
                   v.order, v.dim_block, v.state_split, v.segment, v.save_every, v.h_from_y,
                   v.fwd_blocks, v.fwd_items, v.atomic_sums, v.chained, v.fixed_sums, v.baked}) {
    h = h * 1000003u ^ std::hash<int>()(knob);
  }
  return h;
}

}  // namespace scantune
