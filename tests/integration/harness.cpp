#include "harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace daqiri::test {
namespace {

std::string random_suffix() {
  static std::atomic<int> counter{0};
  return std::to_string(::getpid()) + "x" + std::to_string(counter++);
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// waitpid with a timeout; nullopt if still running.
std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return decode_status(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Until end of file, or an error (SO_RCVTIMEO's included).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

// Reads both pipes until each reaches end of file or `deadline` passes; false on the deadline
// (a hung child keeps its pipes open, so waiting for EOF alone would hang the test with it).
bool read_both(int out_fd, std::string& out, int err_fd, std::string& err,
               std::chrono::steady_clock::time_point deadline) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* dest[2] = {&out, &err};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        dest[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll skips it from now on
        --open;
      }
    }
  }
  return true;
}

// Runs `argv` (setpriv'ed to `as` when given) with stdout and stderr on the given fds and
// `extra_env` added. Everything the child needs is built before fork(): the test process runs
// threads (gRPC's), and a child that allocated could deadlock on a lock one of them held. The
// child dies with the test (PR_SET_PDEATHSIG) so a crashed test leaves no daemon behind.
pid_t spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
            std::optional<std::pair<uid_t, gid_t>> as = std::nullopt,
            const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> full;
  if (as) {
    full = {"/usr/bin/setpriv", "--reuid=" + std::to_string(as->first),
            "--regid=" + std::to_string(as->second), "--init-groups", "--"};
  }
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (auto& a : full)
    args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings(extra_env);
  for (char** e = environ; *e != nullptr; ++e)
    env_strings.emplace_back(*e);
  std::vector<char*> env;
  for (auto& e : env_strings)
    env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execve(args[0], args.data(), env.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "daqiri-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
  // Throwaway users must reach sockets inside.
  std::filesystem::permissions(path_, std::filesystem::perms::all);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  std::string p = file(name);
  std::ofstream(p) << text;
  return p;
}

CommandResult run(const std::vector<std::string>& argv, std::optional<std::pair<uid_t, gid_t>> as,
                  std::chrono::seconds timeout) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  pid_t pid = spawn(argv, out_pipe[1], err_pipe[1], as);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  CommandResult r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool read = read_both(out_pipe[0], r.out, err_pipe[0], r.err, deadline);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  auto code = read ? wait_child(pid, std::max(left, std::chrono::milliseconds(0))) : std::nullopt;
  if (!code) {
    ::kill(pid, SIGKILL);
    code = wait_child(pid, std::chrono::seconds(5));
    r.err += "\n(killed after " + std::to_string(timeout.count()) + " s)";
  }
  r.exit_code = code.value_or(-1);
  return r;
}

Spawned::Spawned(const TempDir& dir, const std::vector<std::string>& argv,
                 std::optional<std::pair<uid_t, gid_t>> as)
    : out_path_(dir.file("spawned-" + random_suffix() + ".out")) {
  UniqueFd out(::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  pid_ = spawn(argv, out.get(), out.get(), as);
}

Spawned::~Spawned() {
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(5));
  }
}

int Spawned::wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return *exit_code_;
  exit_code_ = wait_child(pid_, timeout);
  return exit_code_.value_or(-1);
}

void Spawned::kill(int sig) {
  if (!exit_code_) ::kill(pid_, sig);
}

std::string Spawned::output() const {
  std::ifstream in(out_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Spawned::wait_for_output(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (output().find(needle) != std::string::npos) return true;
    if (!exit_code_) {
      if (auto code = wait_child(pid_, std::chrono::milliseconds(0))) exit_code_ = code;
    }
    if (exit_code_) return output().find(needle) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

NotifyListener::NotifyListener(const std::string& path) : path_(path) {
  fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ::unlink(path.c_str());
  if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error("bind notify socket: " + std::string(std::strerror(errno)));
  }
}

std::string NotifyListener::next(std::chrono::milliseconds timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return {};
  char buf[4096];
  ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool NotifyListener::wait_for(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::string msg = next(left);
    if (msg.find(needle) != std::string::npos) return true;
  }
  return false;
}

DaemonProcess::DaemonProcess(const TempDir& dir, std::vector<std::string> args,
                             std::vector<std::string> extra_env)
    : log_path_(dir.file("daqirid-" + random_suffix() + ".log")),
      notify_(dir.file("notify-" + random_suffix() + ".sock")) {
  UniqueFd log(::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  extra_env.push_back("NOTIFY_SOCKET=" + notify_.path());
  args.insert(args.begin(), daqirid_path());
  pid_ = spawn(args, log.get(), log.get(), std::nullopt, extra_env);
}

DaemonProcess::~DaemonProcess() {
  if (!exit_code_) stop(SIGKILL);
}

bool DaemonProcess::wait_ready(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (notify_.next(std::chrono::milliseconds(50)).find("READY=1") != std::string::npos) {
      return true;
    }
    if (auto code = wait_child(pid_, std::chrono::milliseconds(0))) {
      exit_code_ = code;
      return false;
    }
  }
  return false;
}

int DaemonProcess::stop(int sig, std::chrono::milliseconds timeout) {
  if (exit_code_) return *exit_code_;
  ::kill(pid_, sig);
  exit_code_ = wait_child(pid_, timeout);
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    exit_code_ = wait_child(pid_, std::chrono::seconds(5)).value_or(-1);
    return -1;  // did not stop in time
  }
  return *exit_code_;
}

int DaemonProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (exit_code_) return *exit_code_;
  exit_code_ = wait_child(pid_, timeout);
  return exit_code_.value_or(-1);
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TempGroup::TempGroup() : name_("dqg" + random_suffix()) {
  auto r = run({"/usr/sbin/groupadd", "--system", name_});
  if (r.exit_code != 0) throw std::runtime_error("groupadd: " + r.err);
  group* g = ::getgrnam(name_.c_str());
  if (!g) throw std::runtime_error("group not found after groupadd");
  gid_ = g->gr_gid;
}

TempGroup::~TempGroup() {
  run({"/usr/sbin/groupdel", name_});
}

TempUser::TempUser(const std::string& extra_group) : name_("dqu" + random_suffix()) {
  std::vector<std::string> cmd{"/usr/sbin/useradd", "--system", "--user-group",
                               "--no-create-home",  "--shell",  "/usr/sbin/nologin"};
  if (!extra_group.empty()) {
    cmd.push_back("--groups");
    cmd.push_back(extra_group);
  }
  cmd.push_back(name_);
  auto r = run(cmd);
  if (r.exit_code != 0) throw std::runtime_error("useradd: " + r.err);
  passwd* pw = ::getpwnam(name_.c_str());
  if (!pw) throw std::runtime_error("user not found after useradd");
  uid_ = pw->pw_uid;
  gid_ = pw->pw_gid;
}

TempUser::~TempUser() {
  run({"/usr/sbin/userdel", name_});
}

std::string built_program(const std::string& built_at) {
  // A bundle copied to another host (tools/gpu-check) keeps the programs side by side.
  if (const char* dir = std::getenv("DAQIRI_TEST_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/" + std::filesystem::path(built_at).filename().string();
  }
  return built_at;
}
std::string daqirid_path() {
  return built_program(DAQIRI_TEST_DAQIRID);
}
std::string ctl_path() {
  return built_program(DAQIRI_TEST_CTL);
}
std::string gen_path() {
  return built_program(DAQIRI_TEST_GEN);
}
std::string test_client_path() {
  return built_program(DAQIRI_TEST_CLIENT);
}

std::string adversary_path() {
  return built_program(DAQIRI_TEST_ADVERSARY);
}

std::string k8s_plugin_path() {
  return built_program(DAQIRI_TEST_K8S_PLUGIN);
}
std::string source_dir() {
  return DAQIRI_TEST_SOURCE_DIR;
}
bool is_root() {
  return ::geteuid() == 0;
}

std::string test_config(const std::string& socket, const std::string& daemon_extra,
                        const std::string& metrics) {
  std::ifstream in(source_dir() + "/config/default.yaml");
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  std::string from = "  socket: /run/daqiri/daqiri.sock\n";
  auto at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("default.yaml lost its socket line");
  text.replace(at, from.size(),
               "  socket: " + socket + "\n  metrics: \"" + metrics + "\"\n" + daemon_extra);
  // The default names metrics once: drop that line, ours above wins.
  auto m = text.find("  metrics: 127.0.0.1:9464\n");
  if (m != std::string::npos) text.erase(m, std::string("  metrics: 127.0.0.1:9464\n").size());
  return text;
}

}  // namespace daqiri::test

namespace daqiri::test {

size_t open_fds(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end;
       !ec && it != end; it.increment(ec))
    ++n;
  return n;
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

uint16_t free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback();
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::optional<std::string> http_get(uint16_t port, const std::string& path) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = loopback(port);
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return std::nullopt;
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    return std::nullopt;
  }
  std::string resp = read_all(fd.get());
  auto body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.", 0) != 0 || resp.find(" 200 ") == std::string::npos ||
      body == std::string::npos) {
    return std::nullopt;
  }
  return resp.substr(body + 4);
}

double metric_value(const std::string& body, const std::string& name, const std::string& part) {
  const std::string start = "\n" + name + "{";
  for (size_t at = body.find(start); at != std::string::npos; at = body.find(start, at + 1)) {
    std::string line = body.substr(at + 1, body.find('\n', at + 1) - at - 1);
    if (line.find(part) != std::string::npos) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

}  // namespace daqiri::test
