// Variant names: every enumerated variant round-trips Name -> Parse, names
// are unique, and malformed names are rejected with a message saying why.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/variant.h"
#include "compiler/plan.h"

namespace scantune {
namespace {

TEST(VariantNames, EveryEnumeratedVariantRoundTrips) {
  const std::vector<Variant> variants = EnumerateVariants(Op::kLinearScan, /*include_test_variants=*/true);
  ASSERT_FALSE(variants.empty());
  std::set<std::string> names;
  for (const Variant& v : variants) {
    const std::string name = v.Name();
    StatusOr<Variant> parsed = Variant::Parse(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().ToString();
    EXPECT_EQ(*parsed, v) << name;
    EXPECT_EQ(parsed->Name(), name);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
  }
}

TEST(VariantNames, KnownNamesParse) {
  for (const char* name : {"sequential_v2_t128_p4", "chunked_v2_t128_c64", "lookback_v4_t256_s8_i8",
                           "lookbacksmem_v8_t128_c64_i256", "test_fault", "test_hang"}) {
    StatusOr<Variant> parsed = Variant::Parse(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->Name(), name);
  }
  StatusOr<Variant> lookback = Variant::Parse("lookback_v4_t256_s8_i8");
  ASSERT_TRUE(lookback.ok());
  EXPECT_EQ(lookback->algorithm, Algorithm::kLookback);
  EXPECT_EQ(lookback->vec, 4);
  EXPECT_EQ(lookback->threads, 256);
  EXPECT_EQ(lookback->segments, 8);
  EXPECT_EQ(lookback->items, 8);
  StatusOr<Variant> smem = Variant::Parse("lookbacksmem_v8_t128_c64_i256");
  ASSERT_TRUE(smem.ok());
  EXPECT_EQ(smem->algorithm, Algorithm::kLookbackSmem);
  EXPECT_EQ(smem->vec, 8);
  EXPECT_EQ(smem->threads, 128);
  EXPECT_EQ(smem->strip, 64);
  EXPECT_EQ(smem->tile, 256);
  EXPECT_EQ(smem->order, 0);
  StatusOr<Variant> ordered = Variant::Parse("lookbacksmem_v4_t128_c64_i256_o1");
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(ordered->order, 1);
  EXPECT_EQ(ordered->Name(), "lookbacksmem_v4_t128_c64_i256_o1");
  // _d1 (the chained look-back) follows the order knob, and is left out at 0.
  StatusOr<Variant> chained = Variant::Parse("lookbacksmem_v4_t256_c64_i256_o3_d1");
  ASSERT_TRUE(chained.ok());
  EXPECT_EQ(chained->order, 3);
  EXPECT_EQ(chained->chained, 1);
  EXPECT_EQ(chained->Name(), "lookbacksmem_v4_t256_c64_i256_o3_d1");
  StatusOr<Variant> held = Variant::Parse("lookback_v2_t256_s8_i16_o3_d1");
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->chained, 1);
  EXPECT_NE(*held, *Variant::Parse("lookback_v2_t256_s8_i16_o3"));
  EXPECT_NE(VariantHash()(*held), VariantHash()(*Variant::Parse("lookback_v2_t256_s8_i16_o3")));
  EXPECT_FALSE(Variant::Parse("lookback_v2_t256_s8_i16_d1_o3").ok()) << "knobs keep their order";
  StatusOr<Variant> hybrid = Variant::Parse("chunked_v8_t512_c64_l64_y1_b4_i32_d1");  // _d before _a
  ASSERT_TRUE(hybrid.ok());
  EXPECT_EQ(hybrid->chained, 1);
  EXPECT_FALSE(Variant::Parse("chunked_v8_t512_c64_l64_a1_d1").ok()) << "knobs keep their order";
  EXPECT_FALSE(Variant::Parse("sequential_v2_t64_p8_d1").ok()) << "sequential has no _d knob";
  StatusOr<Variant> pipe = Variant::Parse("lookbackpipe_v4_t256_c64_i128_b3");
  ASSERT_TRUE(pipe.ok());
  EXPECT_EQ(pipe->algorithm, Algorithm::kLookbackPipe);
  EXPECT_EQ(pipe->vec, 4);
  EXPECT_EQ(pipe->threads, 256);
  EXPECT_EQ(pipe->strip, 64);
  EXPECT_EQ(pipe->tile, 128);
  EXPECT_EQ(pipe->blocks_per_sm, 3);
  EXPECT_EQ(pipe->Name(), "lookbackpipe_v4_t256_c64_i128_b3");
  EXPECT_FALSE(Variant::Parse("lookbackpipe_v4_t256_c64_i128").ok());
  // chunked's two optional knobs, each left out at 0, in their order.
  for (const char* name : {"chunked_v8_t256_c32", "chunked_v8_t256_c32_l64", "chunked_v8_t256_c32_h4",
                           "chunked_v8_t256_c32_l64_h4"}) {
    StatusOr<Variant> parsed = Variant::Parse(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->Name(), name);
  }
  StatusOr<Variant> sparse = Variant::Parse("chunked_v8_t256_c32_h4");
  ASSERT_TRUE(sparse.ok());
  EXPECT_EQ(sparse->strip, 0);
  EXPECT_EQ(sparse->save_every, 4);
}

TEST(VariantNames, BadNamesAreRejectedWithReasons) {
  struct Case {
    const char* name;
    const char* says;
  };
  for (const Case& c : {Case{"", "unknown algorithm"}, Case{"bogus_v4", "unknown algorithm"},
                        Case{"lookback_v4_t256_s8", "expected 4 to 7 knobs"},
                        Case{"lookback_v4_t256_s8_i8_x1", "unexpected 'x1'"},
                        Case{"lookback_v4_t256_s8_i8_o2_x1", "expected 4 to 7 knobs"},
                        Case{"lookback_t256_v4_s8_i8", "must start with 'v'"},
                        Case{"sequential_v0_t128_p4", "positive integer"},
                        Case{"sequential_v-2_t128_p4", "positive integer"},
                        Case{"chunked_v2_t128_c", "positive integer"},
                        Case{"chunked_v8_t256_c32_h4_l64", "unexpected 'l64'"},
                        Case{"chunked_v8_t256_c32_h0", "positive integer"},
                        Case{"chunked_v2_t12x_c64", "positive integer"},
                        Case{"lookbacksmem_v8_t128_c64", "expected 4 to 7 knobs"},
                        Case{"lookbacksmem_v8_t128_s8_i256", "must start with 'c'"},
                        Case{"test_fault_v2", "unknown algorithm"}}) {
    StatusOr<Variant> parsed = Variant::Parse(c.name);
    ASSERT_FALSE(parsed.ok()) << "'" << c.name << "' parsed";
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << "'" << c.name << "': " << parsed.status().message();
  }
}

}  // namespace
}  // namespace scantune

namespace scantune {
namespace {

// selective_scan's state-blocked families and their knobs.
TEST(VariantNames, FusedFamiliesRoundTrip) {
  StatusOr<Variant> fused = Variant::Parse("fused_d32_s4_c8");
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  EXPECT_EQ(fused->algorithm, Algorithm::kFused);
  EXPECT_EQ(fused->dim_block, 32);
  EXPECT_EQ(fused->state_split, 4);
  EXPECT_EQ(fused->chunk, 8);
  EXPECT_EQ(fused->Name(), "fused_d32_s4_c8");
  StatusOr<Variant> seg = Variant::Parse("fusedseg_d64_s8_c16_g512");
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ(seg->algorithm, Algorithm::kFusedSeg);
  EXPECT_EQ(seg->segment, 512);
  EXPECT_EQ(seg->Name(), "fusedseg_d64_s8_c16_g512");
  EXPECT_NE(VariantHash()(*fused), VariantHash()(*seg));
  for (const Variant& v : EnumerateVariants(Op::kSelectiveScan, false)) {
    StatusOr<Variant> parsed = Variant::Parse(v.Name());
    ASSERT_TRUE(parsed.ok()) << v.Name();
    EXPECT_EQ(*parsed, v);
  }
  EXPECT_FALSE(Variant::Parse("fused_d32_s4").ok());
  EXPECT_FALSE(Variant::Parse("fusedseg_d32_s4_c8_g0").ok());
  // tscan's optional knobs: state groups, then fixed-order sums.
  StatusOr<Variant> fixed = Variant::Parse("tscan_d4_w1_i8_s2_f1");
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(fixed->state_split, 2);
  EXPECT_EQ(fixed->fixed_sums, 1);
  EXPECT_EQ(fixed->Name(), "tscan_d4_w1_i8_s2_f1");
  EXPECT_EQ(Variant::Parse("tscan_d8_w1_i8_f1")->Name(), "tscan_d8_w1_i8_f1");
  EXPECT_NE(VariantHash()(*Variant::Parse("tscan_d8_w1_i8_f1")), VariantHash()(*Variant::Parse("tscan_d8_w1_i8")));
  EXPECT_FALSE(Variant::Parse("tscan_d4_w1_i8_f1_s2").ok()) << "knobs keep their order";
  EXPECT_FALSE(Variant::Parse("fused_d32_s4_c8_f1").ok()) << "fused has no _f knob";
  EXPECT_FALSE(Variant::Parse("fused_d32_x4_c8").ok());
}

}  // namespace
}  // namespace scantune
