#include "common/framing.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace scantune {
namespace {

Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable(std::string("write to peer failed: ") + std::strerror(errno));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status ReadAll(int fd, char* data, size_t size, std::chrono::steady_clock::time_point deadline, bool forever) {
  while (size > 0) {
    int wait_ms = -1;
    if (!forever) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceeded("peer sent nothing in time");
      wait_ms = static_cast<int>(left.count());
    }
    pollfd pfd{fd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Internal(std::string("poll failed: ") + std::strerror(errno));
    }
    if (ready == 0) return DeadlineExceeded("peer sent nothing in time");
    ssize_t n = ::read(fd, data, size);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Unavailable(std::string("read from peer failed: ") + std::strerror(errno));
    }
    if (n == 0) return Unavailable("peer closed the connection");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  std::string body;
  if (!message.SerializeToString(&body)) return Internal("cannot serialize frame");
  if (body.size() > kMaxFrameBytes) return ResourceExhausted("frame of " + std::to_string(body.size()) + " bytes");
  uint32_t n = static_cast<uint32_t>(body.size());
  unsigned char header[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                             static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const char*>(header), 4));
  return WriteAll(fd, body.data(), body.size());
}

Status ReadFrame(int fd, google::protobuf::MessageLite* message, int timeout_ms) {
  const bool forever = timeout_ms < 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms);
  unsigned char header[4];
  RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(header), 4, deadline, forever));
  uint32_t n = header[0] | (header[1] << 8) | (header[2] << 16) | (uint32_t{header[3]} << 24);
  if (n > kMaxFrameBytes) return ResourceExhausted("peer announced a frame of " + std::to_string(n) + " bytes");
  std::string body(n, '\0');
  RETURN_IF_ERROR(ReadAll(fd, body.data(), n, deadline, forever));
  if (!message->ParseFromString(body)) return Internal("malformed frame from peer");
  return Status::Ok();
}

}  // namespace scantune
