// Stops one thread of another process and lets it go again, the rest of the process running
// on (ptrace: PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH): a daemon's poller that does not
// come round its loop, as a wedged driver call or a bug would leave it, with no seam in the
// daemon. Needs CAP_SYS_PTRACE (root).
//
// Under ThreadSanitizer the stop waits for a moment the thread sits in a system call (a park, a
// sleep): the runtime takes its own mutexes around each atomic access, and a thread stopped
// holding one (a poller's epoch store) wedges every thread that next touches that atomic.
#pragma once

#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace daqiri::test {

class ThreadStop {
 public:
  explicit ThreadStop(pid_t tid) : tid_(tid) {
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      if (::ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) return;
      seized_ = true;
      int status = 0;
      ok_ = ::ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) == 0 &&
            ::waitpid(tid_, &status, __WALL) == tid_ && WIFSTOPPED(status);
      if (!ok_ || in_system_call()) return;
      resume();
      ok_ = false;
      ::usleep(1000);
    }
  }
  ~ThreadStop() { resume(); }
  ThreadStop(const ThreadStop&) = delete;
  ThreadStop& operator=(const ThreadStop&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  // Lets it run again; a thread that died meanwhile (its process exited) is reaped: as its
  // tracer, this process must, or the daemon's exit never completes.
  void resume() {
    if (seized_ && ::ptrace(PTRACE_DETACH, tid_, nullptr, nullptr) != 0) {
      int status = 0;
      for (int i = 0; i < 200 && ::waitpid(tid_, &status, __WALL | WNOHANG) == 0; ++i)
        ::usleep(10'000);
    }
    seized_ = false;
  }
  // The thread of `pid` named `name` (its comm, at most 15 bytes), or -1.
  static pid_t find(pid_t pid, const std::string& name) {
    std::error_code ec;
    for (const auto& t :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::string comm;
      std::getline(std::ifstream(t.path() / "comm"), comm);
      if (comm == name.substr(0, 15)) return std::stoi(t.path().filename().string());
    }
    return -1;
  }

 private:
#if defined(__SANITIZE_THREAD__) && defined(__x86_64__)
  static constexpr int kAttempts = 1000;
  // Stopped inside a system call, the kernel keeps its number in orig_rax; in user code, -1.
  [[nodiscard]] bool in_system_call() const {
    user_regs_struct regs{};
    return ::ptrace(PTRACE_GETREGS, tid_, nullptr, &regs) == 0 &&
           static_cast<long>(regs.orig_rax) >= 0;
  }
#else
  static constexpr int kAttempts = 1;
  [[nodiscard]] bool in_system_call() const {
    return true;
  }
#endif
  pid_t tid_;
  bool seized_ = false;
  bool ok_ = false;
};

}  // namespace daqiri::test
