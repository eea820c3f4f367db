#include "common/framing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "proto/worker.pb.h"

namespace scantune {
namespace {

class FramingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int fds_[2] = {-1, -1};
};

TEST_F(FramingTest, RoundTripsMessagesInOrder) {
  v1::WorkerEvent first;
  first.mutable_started()->set_variant("lookbacksmem_v4_t256_c64_i256");
  v1::WorkerEvent second;
  second.mutable_done()->set_job_id(42);
  ASSERT_TRUE(WriteFrame(fds_[0], first).ok());
  ASSERT_TRUE(WriteFrame(fds_[0], second).ok());
  v1::WorkerEvent got;
  ASSERT_TRUE(ReadFrame(fds_[1], &got, 1000).ok());
  EXPECT_EQ(got.started().variant(), "lookbacksmem_v4_t256_c64_i256");
  ASSERT_TRUE(ReadFrame(fds_[1], &got, 1000).ok());
  EXPECT_EQ(got.done().job_id(), 42u);
}

TEST_F(FramingTest, SilenceIsDeadlineExceededAndCloseIsUnavailable) {
  v1::WorkerEvent got;
  EXPECT_EQ(ReadFrame(fds_[1], &got, 50).code(), StatusCode::kDeadlineExceeded);
  close(fds_[0]);
  fds_[0] = -1;
  EXPECT_EQ(ReadFrame(fds_[1], &got, 1000).code(), StatusCode::kUnavailable);
}

TEST_F(FramingTest, RefusesAnOversizedAnnouncement) {
  const unsigned char header[4] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_EQ(write(fds_[0], header, 4), 4);
  v1::WorkerEvent got;
  EXPECT_EQ(ReadFrame(fds_[1], &got, 1000).code(), StatusCode::kResourceExhausted);
}

TEST_F(FramingTest, MalformedBodyIsAnError) {
  const unsigned char frame[7] = {3, 0, 0, 0, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(fds_[0], frame, 7), 7);
  v1::WorkerEvent got;
  EXPECT_EQ(ReadFrame(fds_[1], &got, 1000).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace scantune
