#include "capture/capture_registry.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <optional>

#include "capture/capture_path.hpp"
#include "system/acting_as.hpp"

namespace daqiri::capture_service {

CaptureRegistry::CaptureRegistry(orchestrator::DataPlane& data_plane,
                                 std::vector<std::string> allowed_dirs)
    : data_plane_(data_plane), allowed_dirs_(std::move(allowed_dirs)) {}

CaptureRegistry::~CaptureRegistry() {
  std::lock_guard lock(mutex_);
  for (auto& [id, job] : jobs_)
    job->stop();
}

Result<UniqueFd> CaptureRegistry::open_beneath(const std::string& path, int flags, uid_t uid,
                                               gid_t gid, const std::vector<gid_t>& groups) const {
  for (const auto& dir : allowed_dirs_) {
    std::string rel = path_beneath(path, dir);
    if (rel.empty()) continue;
    UniqueFd base(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!base) return fail_errno("capture folder " + dir);
    open_how how{};
    // O_NONBLOCK: a FIFO put there must not hold this thread (and the registry's lock) in
    // open(); anything but a regular file is refused below, before a write could block.
    how.flags = uint64_t(flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC | O_EXCL | O_NONBLOCK;
    how.mode = 0640;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    std::optional<system::ActingAs> as_requester;
    if (uid != 0) {
      auto acting = system::ActingAs::begin(uid, gid, groups);
      if (!acting) return std::unexpected(acting.error());
      as_requester.emplace(std::move(*acting));
    }
    auto open2 = [&] {
      return UniqueFd(
          static_cast<int>(::syscall(SYS_openat2, base.get(), rel.c_str(), &how, sizeof how)));
    };
    UniqueFd f = open2();
    bool created = f.valid();
    if (!f && errno == EEXIST) {  // there already: only its owner may write it
      how.flags &= ~uint64_t(O_CREAT | O_EXCL);
      how.mode = 0;  // openat2 wants none without O_CREAT
      f = open2();
    }
    if (!f) {
      int err = errno;
      if (err == EACCES || err == EPERM) {
        return fail(ErrorCode::kPermissionDenied,
                    "capture: " + path + ": uid " + std::to_string(uid) +
                        " may not create or write that file (the daemon writes captures as the "
                        "user who asks)");
      }
      if (err == ENXIO) {  // a FIFO with no reader, opened O_NONBLOCK for writing
        return fail(ErrorCode::kInvalidArgument, "capture: " + path + " is not a regular file");
      }
      if (err == EXDEV || err == ELOOP) {
        return fail(ErrorCode::kPermissionDenied,
                    "capture: " + path +
                        " is reached through a symbolic link; captures are "
                        "written only inside " +
                        dir);
      }
      return fail_errno("capture: open " + path, err);
    }
    struct stat st {};
    if (::fstat(f.get(), &st) != 0) return fail_errno("capture: stat " + path);
    if (!S_ISREG(st.st_mode)) {
      return fail(ErrorCode::kInvalidArgument, "capture: " + path + " is not a regular file");
    }
    if (!created && uid != 0 && st.st_uid != uid) {  // whose it is is not the caller's business
      return fail(ErrorCode::kPermissionDenied, "capture: " + path + " exists and is not yours");
    }
    if (int fl = ::fcntl(f.get(), F_GETFL);
        fl < 0 || ::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK) != 0) {
      return fail_errno("capture: fcntl " + path);
    }
    if ((flags & O_TRUNC) != 0 && ::ftruncate(f.get(), 0) != 0) {
      return fail_errno("capture: truncate " + path);
    }
    return f;
  }
  std::string dirs;
  for (const auto& d : allowed_dirs_)
    dirs += (dirs.empty() ? "" : ", ") + d;
  return fail(ErrorCode::kPermissionDenied,
              "capture: " + path + " is not inside the folders daqirid writes captures to (" +
                  (dirs.empty() ? "none: daemon.capture_dirs is empty" : dirs) + ")");
}

Result<CaptureStatus> CaptureRegistry::start(const CaptureSpec& spec, uid_t uid, gid_t gid,
                                             std::vector<gid_t> groups) {
  std::lock_guard lock(mutex_);
  reap_locked();
  if (jobs_.size() >= kMaxRunning) {
    return fail(ErrorCode::kResourceExhausted,
                "capture: " + std::to_string(kMaxRunning) + " captures run already");
  }
  if (spec.path.empty() || spec.path.front() != '/') {
    return fail(ErrorCode::kInvalidArgument, "capture: the path must be absolute", "path");
  }
  capture::WriterOptions o;
  o.format = spec.format;
  if (spec.snaplen != 0) o.snaplen = spec.snaplen;
  o.rotate_bytes = spec.rotate_bytes;
  std::string what =
      spec.flow.empty() ? "queue " + spec.rx_interface + "/" + spec.rx_queue : spec.flow;
  o.flow = what;
  o.chunk_bytes = 1 << 20;
  o.max_chunks = 8;
  o.preallocate = true;
  o.open_file = [this, uid, gid, groups = std::move(groups)](const std::string& name, int flags) {
    return open_beneath(name, flags, uid, gid, groups);
  };
  orchestrator::RxAttachOptions rx;
  rx.backpressure = dataplane::Backpressure::kDropNew;  // a slow disk never holds the flow
  rx.staging_pool = true;
  // The attachment before the file: a capture of a flow that is not there creates nothing.
  auto id = spec.flow.empty() ? data_plane_.create_rx_queue(spec.rx_interface, spec.rx_queue, rx)
                              : data_plane_.create_rx(spec.flow, rx);
  if (!id) return std::unexpected(id.error());
  auto writer = capture::FileWriter::open(spec.path, o);
  if (!writer) {
    data_plane_.close(*id);
    return std::unexpected(writer.error());
  }
  auto share = data_plane_.activate(*id);
  if (!share) {
    data_plane_.close(*id);
    return std::unexpected(share.error());
  }
  CaptureStatus status;
  status.id = next_id_++;
  status.flow = what;
  status.path = spec.path;
  status.format = spec.format;
  status.uid = uid;
  // On a device queue the staged GPU path puts every packet in pinned host memory before its
  // GPU copy: the capture reads it there and never touches the GPU.
  status.staging = data_plane_.rx_region_kind(*id) == config::RegionKind::kDevice
                       ? "host memory: the device region's pinned staging pool, before the GPU "
                         "copy"
                       : "host memory";
  auto job =
      CaptureJob::start(status, spec.limits, data_plane_, std::move(*share), std::move(*writer));
  if (!job) {
    data_plane_.close(*id);
    return std::unexpected(job.error());
  }
  spdlog::info("capture {}: {} to {} for uid {}", status.id, what, spec.path, uid);
  auto s = (*job)->status();
  jobs_.emplace(status.id, std::move(*job));
  return s;
}

Result<CaptureStatus> CaptureRegistry::stop(uint64_t id, uid_t uid, bool admin) {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    for (const auto& s : ended_) {
      if (s.id == id) return s;
    }
    return fail(ErrorCode::kNotFound, "no capture " + std::to_string(id), "id");
  }
  if (!admin && it->second->status().uid != uid) {
    return fail(ErrorCode::kPermissionDenied,
                "capture " + std::to_string(id) + " belongs to another user");
  }
  CaptureStatus s = end_locked(it);
  spdlog::info("capture {} stopped: {} packets", id, s.packets);
  return s;
}

std::vector<CaptureStatus> CaptureRegistry::list() const {
  std::lock_guard lock(mutex_);
  std::vector<CaptureStatus> out(ended_.begin(), ended_.end());
  for (const auto& [id, job] : jobs_)
    out.push_back(job->status());
  return out;
}

CaptureStatus CaptureRegistry::end_locked(Jobs::iterator& it) {
  it->second->stop();
  CaptureStatus s = it->second->status();
  it = jobs_.erase(it);
  ended_.push_back(s);
  if (ended_.size() > kMaxEnded) ended_.pop_front();
  return s;
}

void CaptureRegistry::reap_locked() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second->status().running) {
      ++it;
    } else {
      end_locked(it);
    }
  }
}

}  // namespace daqiri::capture_service
