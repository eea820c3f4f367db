// Named spdlog loggers per layer ("server", "worker", "compiler", "db",
// "client"). Levels come from SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=debug or
// SPDLOG_LEVEL=info,worker=debug). Logs go to stderr.
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace scantune {

// Reads SPDLOG_LEVEL once; safe to call more than once.
void InitLogging();

// The named logger, created on first use.
std::shared_ptr<spdlog::logger> Logger(const char* name);

}  // namespace scantune
