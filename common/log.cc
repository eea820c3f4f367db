#include "common/log.h"

#include <mutex>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace scantune {

void InitLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
    spdlog::cfg::load_env_levels();
  });
}

std::shared_ptr<spdlog::logger> Logger(const char* name) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = spdlog::stderr_color_mt(name);
  // New loggers take the level SPDLOG_LEVEL gave for their name (or the default).
  spdlog::cfg::load_env_levels();
  return spdlog::get(name) ? spdlog::get(name) : logger;
}

}  // namespace scantune
