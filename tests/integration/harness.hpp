// Test harness: real daqirid processes, real daqiri-ctl runs, throwaway users. Nothing here
// imitates the daemon; it only starts, watches and stops the real one.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "daqiri/common/unique_fd.hpp"

namespace daqiri::test {

// A temporary directory removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` inside and returns the full path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;
  std::string err;
};

// Runs argv[0] with the given arguments, optionally as another user through setpriv.
CommandResult run(const std::vector<std::string>& argv,
                  std::optional<std::pair<uid_t, gid_t>> as = std::nullopt,
                  std::chrono::seconds timeout = std::chrono::seconds(30));

// A process running in the background, stdout and stderr to a file; killed if still running
// at destruction.
class Spawned {
 public:
  Spawned(const TempDir& dir, const std::vector<std::string>& argv,
          std::optional<std::pair<uid_t, gid_t>> as = std::nullopt);
  ~Spawned();
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;
  // Exit code (128+N for signal N), or -1 if still running after `timeout`.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void kill(int sig);
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string output() const;
  // Waits until the output contains `needle`; false after `timeout` or if the process exited.
  bool wait_for_output(const std::string& needle,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  std::string out_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// A datagram socket playing systemd's side of the notify protocol.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& path);
  [[nodiscard]] const std::string& path() const { return path_; }
  // Next message, or empty after `timeout`.
  std::string next(std::chrono::milliseconds timeout);
  // Waits until a message containing `needle` arrives; false after `timeout`.
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout);

 private:
  std::string path_;
  UniqueFd fd_;
};

// A daqirid process started with `args`; stderr goes to a file in `dir`.
class DaemonProcess {
 public:
  DaemonProcess(const TempDir& dir, std::vector<std::string> args,
                std::vector<std::string> extra_env = {});
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // True once READY=1 arrived; false if the daemon exited or the timeout passed. The default
  // covers the EAL mapping 256 MB of hugepages under TSan beside another test: over 9 s seen.
  bool wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends `sig` and waits for exit; returns the exit code (128+N for death by signal N).
  int stop(int sig = 15, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits for the process to exit by itself.
  int wait_exit(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string log() const;
  NotifyListener& notify() { return notify_; }

 private:
  std::string log_path_;
  NotifyListener notify_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// A system user (and its own group) created for one test and removed afterwards.
class TempUser {
 public:
  // `extra_group`: also a member of this existing group.
  explicit TempUser(const std::string& extra_group = "");
  ~TempUser();
  TempUser(const TempUser&) = delete;
  TempUser& operator=(const TempUser&) = delete;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] uid_t uid() const { return uid_; }
  [[nodiscard]] gid_t gid() const { return gid_; }
  [[nodiscard]] std::pair<uid_t, gid_t> ids() const { return {uid_, gid_}; }

 private:
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

class TempGroup {
 public:
  TempGroup();
  ~TempGroup();
  TempGroup(const TempGroup&) = delete;
  TempGroup& operator=(const TempGroup&) = delete;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] gid_t gid() const { return gid_; }

 private:
  std::string name_;
  gid_t gid_ = 0;
};

// Paths of the binaries under test and of the source tree, set by CMake.
std::string daqirid_path();
// Where a program of this build is: as built, or in $DAQIRI_TEST_BIN_DIR when set.
std::string built_program(const std::string& built_at);
std::string ctl_path();
std::string gen_path();
std::string test_client_path();
std::string adversary_path();  // daqiri-adversary: the hostile client
std::string k8s_plugin_path();
std::string source_dir();
bool is_root();
// This build runs under ASan or TSan: the daemon and its clients are several times slower, so
// volume and responsiveness are scaled or not judged.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// A live process's open file descriptors, from /proc (0 once it is gone).
size_t open_fds(pid_t pid);

// A daqirid config in our schema for tests: the embedded default with `socket` and extra
// daemon keys (indented YAML lines under `daemon:`).
std::string test_config(const std::string& socket, const std::string& daemon_extra = "",
                        const std::string& metrics = "off");

// 127.0.0.1:port (0: any port), for the tests' own sockets.
sockaddr_in loopback(uint16_t port = 0);
// A loopback TCP port no one listens on right now (for servers the test starts).
uint16_t free_tcp_port();
// GET http://127.0.0.1:port/path; the body, or nullopt on any failure.
std::optional<std::string> http_get(uint16_t port, const std::string& path);
// In a Prometheus text exposition: the value of the first series of `name` whose line contains
// `part` (a label, say), or -1 when there is none.
double metric_value(const std::string& body, const std::string& name, const std::string& part);

}  // namespace daqiri::test
