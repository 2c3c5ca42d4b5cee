#include "system/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace daqiri::system {
namespace {

// JOURNAL_STREAM is "dev:ino" of the journal's stream socket, set by systemd for services.
bool stderr_is_journal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (!js) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return std::string(js) == std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

class SyslogPriority final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kPriority[] = {'7', '7', '6', '4', '3', '2', '6'};  // by spdlog level
    char text[3] = {'<', kPriority[msg.level], '>'};
    dest.append(text, text + 3);
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPriority>();
  }
};

spdlog::level::level_enum to_spdlog(config::LogLevel level) {
  switch (level) {
    case config::LogLevel::kTrace:
      return spdlog::level::trace;
    case config::LogLevel::kDebug:
      return spdlog::level::debug;
    case config::LogLevel::kInfo:
      return spdlog::level::info;
    case config::LogLevel::kWarn:
      return spdlog::level::warn;
    case config::LogLevel::kError:
      return spdlog::level::err;
    case config::LogLevel::kCritical:
      return spdlog::level::critical;
    case config::LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void setup_logging(config::LogLevel level) {
  auto logger = spdlog::stderr_color_mt("daqirid");  // colours only when stderr is a tty
  if (stderr_is_journal()) {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<SyslogPriority>('*').set_pattern("%*%v");
    logger->set_formatter(std::move(f));
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  }
  spdlog::set_default_logger(logger);
  set_log_level(level);
  spdlog::flush_on(spdlog::level::info);
}

void set_log_level(config::LogLevel level) {
  spdlog::set_level(to_spdlog(level));
}

}  // namespace daqiri::system
