// PackParams (client/param_pack.h): a served backend's parameter struct
// packed by field name, and refused with the field named.
#include "client/param_pack.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <tuple>

#include "compiler/plan.h"

namespace scantune {
namespace {

google::protobuf::RepeatedPtrField<v1::ParamField> Layout(
    std::initializer_list<std::tuple<const char*, uint32_t, uint32_t, const char*, const char*>> fields) {
  google::protobuf::RepeatedPtrField<v1::ParamField> out;
  for (const auto& [name, offset, size, type, meaning] : fields) {
    v1::ParamField* f = out.Add();
    f->set_name(name);
    f->set_offset_bytes(offset);
    f->set_size_bytes(size);
    f->set_type(type);
    f->set_meaning(meaning);
  }
  return out;
}

template <typename T>
T At(const std::vector<uint8_t>& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

TEST(PackParams, PlacesValuesByName) {
  // Deliberately not in declaration order, with a 4-byte integer.
  const auto layout = Layout({{"width", 24, 4, "i32", "W"},
                              {"x", 8, 8, "ptr", "input"},
                              {"h0", 0, 8, "ptr", "initial state; null: zero"},
                              {"batch", 16, 8, "i64", "B"}});
  ParamValues v;
  v["x"] = ParamValue::Pointer(0x1234500);
  v["h0"] = ParamValue::Null();
  v["batch"] = ParamValue::Integer(4);
  v["width"] = ParamValue::Integer(2048);
  v["not_in_this_backend"] = ParamValue::Pointer(0x99, false);
  auto bytes = PackParams(layout, 32, v);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_EQ(bytes->size(), 32u);
  EXPECT_EQ(At<uint64_t>(*bytes, 0), 0u);
  EXPECT_EQ(At<uint64_t>(*bytes, 8), 0x1234500u);
  EXPECT_EQ(At<int64_t>(*bytes, 16), 4);
  EXPECT_EQ(At<int32_t>(*bytes, 24), 2048);
  EXPECT_EQ(At<int32_t>(*bytes, 28), 0) << "padding stays zero";
}

TEST(PackParams, RefusesWithTheFieldNamed) {
  const auto layout = Layout({{"x", 0, 8, "ptr", "input"}, {"mystery", 8, 8, "i64", "?"}});
  ParamValues v;
  v["x"] = ParamValue::Pointer(0x100);
  auto unknown = PackParams(layout, 16, v);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("mystery"), std::string::npos);

  v["mystery"] = ParamValue::Integer(1);
  v["dx"] = ParamValue::Pointer(0x200);  // required, not in the layout
  auto missing = PackParams(layout, 16, v);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'dx'"), std::string::npos);
  v.erase("dx");
  EXPECT_TRUE(PackParams(layout, 16, v).ok());

  v["x"] = ParamValue::Null();
  auto null_refused = PackParams(layout, 16, v);
  ASSERT_FALSE(null_refused.ok()) << "x's meaning does not allow null";
  EXPECT_NE(null_refused.status().message().find("null"), std::string::npos);

  v["x"] = ParamValue::Integer(3);
  EXPECT_FALSE(PackParams(layout, 16, v).ok()) << "an integer into a pointer field";
  v["x"] = ParamValue::Pointer(0x100);
  EXPECT_FALSE(PackParams(layout, 12, v).ok()) << "field past the struct";
  const auto narrow = Layout({{"n", 0, 4, "i32", "count"}});
  EXPECT_FALSE(PackParams(narrow, 4, {{"n", ParamValue::Integer(int64_t{1} << 40)}}).ok());
  EXPECT_FALSE(PackParams({}, 0, {}).ok()) << "an empty layout";
}

TEST(PackParams, ServedLinearScanLayoutPacks) {
  // The real producer's format (compiler ParamLayout), packed by name.
  google::protobuf::RepeatedPtrField<v1::ParamField> layout;
  for (const v1::ParamField& f : ParamLayout(Op::kLinearScan)) *layout.Add() = f;
  ParamValues v;
  uint64_t p = 0x1000;
  for (const char* name : {"a", "x", "h", "dh", "da", "dx", "workspace"}) v[name] = ParamValue::Pointer(p += 0x100);
  for (const char* name : {"h0", "h_final", "dh0"}) v[name] = ParamValue::Null();
  v["batch"] = ParamValue::Integer(4);
  v["length"] = ParamValue::Integer(2048);
  v["width"] = ParamValue::Integer(2048);
  auto bytes = PackParams(layout, ParamSize(Op::kLinearScan), v);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  for (const v1::ParamField& f : layout) {
    if (f.name() == "width") {
      EXPECT_EQ(At<int64_t>(*bytes, f.offset_bytes()), 2048);
    }
    if (f.name() == "x") {
      EXPECT_EQ(At<uint64_t>(*bytes, f.offset_bytes()), 0x1200u);
    }
  }
}

// CheckServedSizes: the sizes a caller packs against the problem the backend was served for.
TEST(CheckServedSizes, OtherSizesThanTheServedProblemsAreRefused) {
  v1::KernelResponse kernel;
  kernel.set_variant("lookback_v2_t256_s8_i16_o3_k1");
  const ParamValues sizes = {{"batch", ParamValue::Integer(4)},
                             {"length", ParamValue::Integer(2048)},
                             {"width", ParamValue::Integer(1024)},
                             {"x", ParamValue::Pointer(0x1000)}};
  EXPECT_TRUE(CheckServedSizes(kernel, sizes).ok());  // no problem served (an older daemon): nothing to check
  v1::Problem* p = kernel.mutable_problem();
  p->set_op("rglru");
  p->mutable_shape()->set_batch(4);
  p->mutable_shape()->set_length(2048);
  p->mutable_shape()->set_width(2048);
  const Status wrong = CheckServedSizes(kernel, sizes);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  for (const char* says : {"'width' is 1024", "lookback_v2_t256_s8_i16_o3_k1", "rglru 4x2048x2048", "width 2048"}) {
    EXPECT_NE(wrong.message().find(says), std::string::npos) << says << " in: " << wrong.message();
  }
  ParamValues right = sizes;
  right["width"] = ParamValue::Integer(2048);
  EXPECT_TRUE(CheckServedSizes(kernel, right).ok());
  right.erase("length");  // a size not given is PackParams's to name
  EXPECT_TRUE(CheckServedSizes(kernel, right).ok());
  // selective_scan: D is the shape's width, N its state_dim (0: 16).
  p->set_op("selective_scan");
  const ParamValues ssm = {{"batch", ParamValue::Integer(4)},
                           {"length", ParamValue::Integer(2048)},
                           {"dim", ParamValue::Integer(2048)},
                           {"state", ParamValue::Integer(16)}};
  EXPECT_TRUE(CheckServedSizes(kernel, ssm).ok());
  p->set_state_dim(32);
  const Status state = CheckServedSizes(kernel, ssm);
  EXPECT_EQ(state.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(state.message().find("'state' is 16"), std::string::npos) << state.message();
}

}  // namespace
}  // namespace scantune
