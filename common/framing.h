// Length-prefixed protobuf frames over a file descriptor (the daemon <->
// worker socketpair): 4-byte little-endian length, then the message bytes.
#pragma once

#include <cstdint>

#include <google/protobuf/message_lite.h>

#include "common/status.h"

namespace scantune {

// Frames above this size are refused on both ends (cubins are well under it).
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;

Status WriteFrame(int fd, const google::protobuf::MessageLite& message);

// Waits at most timeout_ms (< 0: forever). DEADLINE_EXCEEDED on timeout,
// UNAVAILABLE when the peer closed the connection.
Status ReadFrame(int fd, google::protobuf::MessageLite* message, int timeout_ms);

}  // namespace scantune
