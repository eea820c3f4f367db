// The one place where scantune::Status and grpc::Status meet. The daemon's
// service converts Engine results with ToGrpcStatus; the client library turns
// what came over the wire back into a Status with FromGrpcStatus, so that code
// on both sides of the RPC boundary speaks the same error type.
// Stateless free functions; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace scantune {

// Maps each StatusCode onto the gRPC code of the same meaning; the message
// travels unchanged.
grpc::Status ToGrpcStatus(const Status& status);

// The inverse. gRPC codes with no StatusCode of their own (CANCELLED,
// UNKNOWN, PERMISSION_DENIED, OUT_OF_RANGE, DATA_LOSS) keep
// their gRPC name in the message so nothing is lost.
Status FromGrpcStatus(const grpc::Status& status);

// "INVALID_ARGUMENT", "UNAVAILABLE", ... for messages shown to people.
const char* GrpcCodeName(grpc::StatusCode code);

// The call metadata naming a caller for the daemon's per-client job bound
// (EngineOptions::max_jobs_per_client); ScantuneClient sends "host:pid".
inline constexpr char kClientMetadataKey[] = "scantune-client";

}  // namespace scantune
