// GPU end-to-end test (ctest label `gpu`): the real scantuned with the real
// scantune-worker. Tunes a small linear_scan problem with a few real variants
// plus test_fault, and checks that the fault is recorded as ILLEGAL_ADDRESS,
// the daemon survives it, and a real variant is selected.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/problem.h"
#include "compiler/plan.h"
#include "tests/integration/test_daemon.h"

namespace scantune::testing {
namespace {

TEST(GpuDaemonTest, FaultIsRecordedAndARealVariantIsSelected) {
  TestDaemonOptions options;
  options.worker = SCANTUNE_WORKER_PATH;
  options.flags = {"--enable-test-variants", "--candidate-timeout-s", "30"};
  auto started = TestDaemon::Start(options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  TestDaemon& daemon = **started;
  std::unique_ptr<ScantuneClient> client = daemon.Client();

  StatusOr<v1::ListDevicesResponse> devices = client->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  ASSERT_GE(devices->devices_size(), 1) << "no GPU: " << devices->note();

  v1::TuneRequest request;
  v1::Problem* problem = request.mutable_problem();
  problem->set_op("linear_scan");
  problem->mutable_shape()->set_batch(2);
  problem->mutable_shape()->set_length(1024);
  problem->mutable_shape()->set_width(1024);
  problem->set_dtype(v1::BF16);
  problem->set_mode(v1::FWD_BWD);
  StatusOr<Problem> parsed = ProblemFromProto(*problem);
  ASSERT_TRUE(parsed.ok());
  DeviceLimits limits = DeviceLimits::FromProto(devices->devices(0));
  std::map<Algorithm, std::string> one_each;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
    if (CanImplement(v, *parsed, limits).ok() && !one_each.count(v.algorithm)) one_each[v.algorithm] = v.Name();
  }
  std::set<std::string> real;
  for (const auto& [algorithm, name] : one_each) {
    request.add_variants(name);
    real.insert(name);
  }
  request.add_variants("test_fault");
  request.set_force(true);

  int updates = 0;
  StatusOr<v1::Selection> selection = client->Tune(request, [&](const v1::TuneProgress&) { ++updates; });
  ASSERT_TRUE(selection.ok()) << selection.status().ToString() << "\n" << daemon.Log();
  EXPECT_GT(updates, 0);
  EXPECT_TRUE(real.count(selection->variant())) << selection->variant();
  EXPECT_TRUE(daemon.Serving().ok()) << daemon.Log();

  v1::ListRecordsRequest list;
  list.mutable_filter()->set_variant("test_fault");
  StatusOr<v1::ListRecordsResponse> faults = client->ListRecords(list);
  ASSERT_TRUE(faults.ok()) << faults.status().ToString();
  ASSERT_GE(faults->records_size(), 1);
  EXPECT_EQ(faults->records(0).state(), v1::ILLEGAL_ADDRESS) << faults->records(0).detail();

  v1::SelectRequest select;
  *select.mutable_problem() = *problem;
  StatusOr<v1::Selection> selected = client->Select(select);
  ASSERT_TRUE(selected.ok()) << selected.status().ToString();
  EXPECT_EQ(selected->variant(), selection->variant());
  StatusOr<v1::Record> record = client->GetRecord(selected->record_id());
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->state(), v1::OK);
  EXPECT_GT(record->fwd_bwd().median_ms() + record->fwd().median_ms(), 0);
  EXPECT_TRUE(daemon.Stop().ok()) << daemon.Log();
}

}  // namespace
}  // namespace scantune::testing
