// Table-driven bad requests sent with the client library straight to a real
// scantuned (fake worker, default flags: no test variants, no benchmarks).
// Each must be answered with the expected gRPC code and a message that names
// the problem, and the daemon must keep serving afterwards.
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/test_daemon.h"

namespace scantune::testing {
namespace {

using ::testing::HasSubstr;

v1::Problem MakeProblem(uint32_t batch, uint32_t length, uint32_t width) {
  v1::Problem p;
  p.set_op("linear_scan");
  p.mutable_shape()->set_batch(batch);
  p.mutable_shape()->set_length(length);
  p.mutable_shape()->set_width(width);
  p.set_dtype(v1::BF16);
  p.set_mode(v1::FWD_BWD);
  return p;
}

v1::Problem GoodProblem() { return MakeProblem(2, 256, 512); }

struct BadRequest {
  const char* name;
  std::function<Status(ScantuneClient&)> call;
  StatusCode code;
  const char* names;  // the message must contain this
};

Status SelectOf(ScantuneClient& c, const v1::Problem& problem, const std::string& uuid = "") {
  v1::SelectRequest request;
  *request.mutable_problem() = problem;
  request.set_device_uuid(uuid);
  return c.Select(request).status();
}

Status TuneOf(ScantuneClient& c, const v1::Problem& problem, const std::vector<std::string>& variants,
              const std::string& uuid = "") {
  v1::TuneRequest request;
  *request.mutable_problem() = problem;
  for (const std::string& v : variants) request.add_variants(v);
  request.set_device_uuid(uuid);
  return c.Tune(request, nullptr).status();
}

std::vector<BadRequest> Cases() {
  auto with = [](std::function<void(v1::Problem&)> edit) {
    v1::Problem p = GoodProblem();
    edit(p);
    return p;
  };
  std::vector<std::string> too_many;
  for (int i = 0; i < 600; ++i) too_many.push_back("sequential_v2_t128_p" + std::to_string(i + 1));
  return {
      {"zero batch", [](auto& c) { return SelectOf(c, MakeProblem(0, 256, 512)); }, StatusCode::kInvalidArgument,
       "batch"},
      {"zero width in tune", [](auto& c) { return TuneOf(c, MakeProblem(2, 256, 0), {}); },
       StatusCode::kInvalidArgument, "width"},
      // A negative dimension reaches the wire as its uint32 image, far beyond any limit.
      {"negative length", [](auto& c) { return SelectOf(c, MakeProblem(2, static_cast<uint32_t>(-1), 512)); },
       StatusCode::kInvalidArgument, "length"},
      {"huge width", [](auto& c) { return SelectOf(c, MakeProblem(2, 256, 1u << 24)); },
       StatusCode::kInvalidArgument, "width"},
      {"too many elements", [](auto& c) { return SelectOf(c, MakeProblem(4096, 1u << 20, 1u << 16)); },
       StatusCode::kInvalidArgument, "elements"},
      {"unknown op", [=](auto& c) { return SelectOf(c, with([](auto& p) { p.set_op("warp_scan"); })); },
       StatusCode::kInvalidArgument, "warp_scan"},
      {"missing op", [=](auto& c) { return SelectOf(c, with([](auto& p) { p.set_op(""); })); },
       StatusCode::kInvalidArgument, "op"},
      {"selective_scan option on another operator",
       [=](auto& c) { return SelectOf(c, with([](auto& p) { p.set_z_gate(true); })); }, StatusCode::kInvalidArgument,
       "selective_scan only"},
      {"unsupported state size",
       [=](auto& c) {
         return SelectOf(c, with([](auto& p) {
           p.set_op("selective_scan");
           p.set_state_dim(12);
         }));
       },
       StatusCode::kInvalidArgument, "8, 16, 32 or 64"},
      {"unspecified dtype",
       [=](auto& c) { return SelectOf(c, with([](auto& p) { p.set_dtype(v1::DTYPE_UNSPECIFIED); })); },
       StatusCode::kInvalidArgument, "dtype"},
      {"unspecified mode",
       [=](auto& c) { return TuneOf(c, with([](auto& p) { p.set_mode(v1::MODE_UNSPECIFIED); }), {}); },
       StatusCode::kInvalidArgument, "mode"},
      {"unknown variant", [](auto& c) { return TuneOf(c, GoodProblem(), {"warpdrive_v4_t128"}); },
       StatusCode::kInvalidArgument, "warpdrive"},
      {"malformed variant", [](auto& c) { return TuneOf(c, GoodProblem(), {"lookback_v4_t256_sX_i8"}); },
       StatusCode::kInvalidArgument, "lookback_v4_t256_sX_i8"},
      {"too many variants", [=](auto& c) { return TuneOf(c, GoodProblem(), too_many); },
       StatusCode::kInvalidArgument, "too many variants"},
      {"test variant not enabled", [](auto& c) { return TuneOf(c, GoodProblem(), {"test_fault"}); },
       StatusCode::kInvalidArgument, "test_fault"},
      {"unknown device in select", [](auto& c) { return SelectOf(c, GoodProblem(), "GPU-nope"); },
       StatusCode::kNotFound, "GPU-nope"},
      {"unknown device in tune", [](auto& c) { return TuneOf(c, GoodProblem(), {}, "GPU-nope"); },
       StatusCode::kNotFound, "GPU-nope"},
      {"never tuned", [](auto& c) { return SelectOf(c, GoodProblem()); }, StatusCode::kNotFound, "no selection"},
      {"bad page token",
       [](auto& c) {
         v1::ListRecordsRequest request;
         request.set_page_token("not-a-token!");
         return c.ListRecords(request).status();
       },
       StatusCode::kInvalidArgument, "page_token"},
      {"missing record", [](auto& c) { return c.GetRecord(987654321).status(); }, StatusCode::kNotFound,
       "987654321"},
      {"kernel of a malformed variant",
       [](auto& c) {
         v1::GetKernelRequest request;
         *request.mutable_problem() = GoodProblem();
         request.set_variant("chunked_v4");
         return c.GetKernel(request).status();
       },
       StatusCode::kInvalidArgument, "chunked_v4"},
      {"benchmark when disabled",
       [](auto& c) {
         v1::BenchmarkRequest request;
         *request.add_problems() = GoodProblem();
         request.add_variants("sequential_v2_t128_p2");
         return c.Benchmark(request).status();
       },
       StatusCode::kFailedPrecondition, "benchmark"},
  };
}

TEST(BadRequestTest, EachIsAnsweredWithItsCodeAndTheDaemonKeepsServing) {
  TestDaemonOptions options;
  options.worker = SCANTUNE_FAKE_WORKER_PATH;
  auto daemon = TestDaemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  std::unique_ptr<ScantuneClient> client = (*daemon)->Client();

  for (const BadRequest& bad : Cases()) {
    SCOPED_TRACE(bad.name);
    Status status = bad.call(*client);
    EXPECT_EQ(status.code(), bad.code) << status.ToString();
    EXPECT_THAT(status.message(), HasSubstr(bad.names));
    EXPECT_TRUE((*daemon)->Serving().ok()) << (*daemon)->Log();
  }

  StatusOr<v1::ListDevicesResponse> devices = client->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  EXPECT_EQ(devices->devices_size(), 1);
  // The client's channel stays open on purpose: a connected idle client must
  // not hold up the daemon's shutdown.
  EXPECT_TRUE((*daemon)->Stop().ok()) << (*daemon)->Log();
}

// A request larger than the daemon accepts is refused by gRPC itself.
TEST(BadRequestTest, OversizedRequestIsRefused) {
  TestDaemonOptions options;
  options.worker = SCANTUNE_FAKE_WORKER_PATH;
  options.flags = {"--max-message-bytes", "65536"};
  auto daemon = TestDaemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  v1::TuneRequest request;
  *request.mutable_problem() = GoodProblem();
  for (int i = 0; i < 4000; ++i) request.add_variants("sequential_v2_t128_p" + std::to_string(i + 1));
  Status status = (*daemon)->Client()->Tune(request, nullptr).status();
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();
  EXPECT_TRUE((*daemon)->Serving().ok());
}

}  // namespace
}  // namespace scantune::testing
