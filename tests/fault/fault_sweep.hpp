// What a fault sweep tries and how it reports: the errnos (or CUresults) each call really fails
// with, the trials for the sites a census found, and the checks every sweep makes of what a
// failure left behind.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fault_injector.hpp"

namespace daqiri::fault {

// CUresults (cuda.h) the CUDA calls fail with; cuda.h stays out of the tests that need none.
inline constexpr int kCudaErrorOutOfMemory = 2;
inline constexpr int kCudaErrorOperatingSystem = 304;

// The errors a call gives when it really fails, the likeliest first; in Call's order.
inline const std::vector<int> kErrors[] = {
    {EMFILE, ENOMEM},                                    // memfd_create
    {ENOMEM},                                            // mmap
    {ENOMEM, EIO},                                       // ftruncate
    {ENOSPC},                                            // fallocate
    {EMFILE},                                            // dup
    {EMFILE, ECONNABORTED},                              // accept4
    {ENOBUFS, EAGAIN},                                   // sendmsg
    {ENOBUFS, EAGAIN, EINTR},                            // sendmmsg
    {EINTR, EAGAIN, ENOBUFS, ENOMEM},                    // recvmmsg
    {ENOSPC, EIO},                                       // write
    {EIO},                                               // fsync
    {ENOMEM, ENOSPC},                                    // epoll_ctl
    {EMFILE},                                            // pidfd_open
    {EMFILE, ENOSPC},                                    // open
    {kCudaErrorOutOfMemory},                             // cuMemCreate
    {kCudaErrorOutOfMemory, kCudaErrorOperatingSystem},  // cuMemExportToShareableHandle
    {kCudaErrorOutOfMemory},                             // cuMemAlloc
};
static_assert(std::size(kErrors) == static_cast<size_t>(Call::kCount));

inline bool is_cuda(Call c) {
  return c >= Call::kCuMemCreate;
}

inline std::string error_name(Call c, int error) {
  if (!is_cuda(c)) return strerrorname_np(error);
  if (error == kCudaErrorOutOfMemory) return "CUDA_ERROR_OUT_OF_MEMORY";
  if (error == kCudaErrorOperatingSystem) return "CUDA_ERROR_OPERATING_SYSTEM";
  return "CUresult " + std::to_string(error);
}

// What the sweep tries at each site: its first, second and last use with the likeliest error,
// and its first use with each other one.
inline std::vector<Fault> trials_for(const std::vector<SiteUse>& sites) {
  std::vector<Fault> out;
  for (const auto& s : sites) {
    const auto& errors = kErrors[static_cast<size_t>(s.call)];
    std::set<uint64_t> uses{1, std::min<uint64_t>(2, s.uses), s.uses};
    for (uint64_t n : uses)
      out.push_back({s.call, s.offset, n, 1, errors[0]});
    for (size_t e = 1; e < errors.size(); ++e)
      out.push_back({s.call, s.offset, 1, 1, errors[e]});
  }
  return out;
}

inline std::string describe(const Fault& f) {
  return std::string(name_of(f.call)) + " use " + std::to_string(f.nth) + " " +
         error_name(f.call, f.error) + " at " + describe_site(f.site);
}

inline void print_sites(const std::string& title, const std::vector<SiteUse>& sites) {
  std::printf("%s: %zu call sites\n", title.c_str(), sites.size());
  for (const auto& s : sites) {
    std::printf("  %-12s %6lu uses  %s\n", name_of(s.call), static_cast<unsigned long>(s.uses),
                describe_site(s.offset).c_str());
  }
}

// Entries of a folder but the logs, outputs and notify sockets each run adds.
inline std::set<std::string> leftovers(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.starts_with("daqirid-") || name.starts_with("notify-") ||
        name.starts_with("spawned-")) {
      continue;
    }
    out.insert(e.path().string());
  }
  return out;
}

// Every site the census found must have been failed at least once by the sweep.
inline void report(const std::vector<SiteUse>& sites, const std::set<uint64_t>& failed,
                   const char* phase, size_t trials) {
  std::printf("%s: %zu of %zu call sites failed in %zu trials\n", phase, failed.size(),
              sites.size(), trials);
  for (const auto& s : sites) {
    EXPECT_TRUE(failed.contains(s.offset))
        << "never failed: " << name_of(s.call) << " at " << describe_site(s.offset);
  }
}

// A failed client's output gives a reason after `prefix`.
inline bool says_why(const std::string& output, const std::string& prefix) {
  auto at = output.find(prefix);
  return at != std::string::npos && output.size() > at + prefix.size() + 1;
}

// A site the census met by timing (work that came while it counted) may not be met by one run
// of its trial: until the site has failed once, its trial runs again, up to this many times.
inline constexpr int kTries = 3;

// Runs `trial` once for each fault trials_for(sites) gives, under its description; the trial arms
// the injector where its scenario should meet the fault. A site counts as failed once its fault
// fired. Stops at a fatal failure (an ASSERT in a trial ends only the trial); else reports.
inline void sweep(FaultInjector& faults, const std::vector<SiteUse>& sites, const char* phase,
                  const std::function<void(const Fault&)>& trial) {
  std::set<uint64_t> failed_sites;
  auto trials = trials_for(sites);
  size_t runs = 0;
  for (const Fault& f : trials) {
    SCOPED_TRACE(describe(f));
    for (int attempt = 0; attempt < kTries; ++attempt) {
      trial(f);
      ++runs;
      if (faults.fired() > 0) failed_sites.insert(f.site);
      if (::testing::Test::HasFatalFailure()) return;
      if (failed_sites.contains(f.site)) break;
    }
  }
  report(sites, failed_sites, phase, runs);
}

// The start sweep: each trial starts a daemon (`start`) with its fault armed. One that comes up
// must serve (`serves` checks, then stops it); one that does not must end non-zero by itself,
// not by a signal, with `error_text` of the fault in its log and nothing left in `dir` that was
// not there before.
struct StartSweep {
  std::function<std::unique_ptr<test::DaemonProcess>()> start;
  std::function<void(test::DaemonProcess&)> serves;
  std::function<std::string(const Fault&)> error_text;
  std::chrono::milliseconds ready_within{std::chrono::seconds(15)};
};

// The census for a start sweep: the daemon started once, armed with no fault; the sites its
// start reached (none when it did not start: a failure).
inline std::vector<SiteUse> start_census(FaultInjector& faults, const StartSweep& how) {
  faults.arm();
  auto d = how.start();
  bool ready = d->wait_ready(how.ready_within);
  faults.disarm();
  EXPECT_TRUE(ready) << d->log();
  if (!ready) return {};
  EXPECT_EQ(d->stop(), 0) << d->log();
  return faults.sites();
}

inline void sweep_start(FaultInjector& faults, const std::vector<SiteUse>& sites,
                        const std::string& dir, const StartSweep& how) {
  auto clean = leftovers(dir);
  int exited = 0;
  sweep(faults, sites, "start", [&](const Fault& f) {
    faults.arm(f);
    auto d = how.start();
    bool ready = d->wait_ready(how.ready_within);
    faults.disarm();
    if (ready) {
      how.serves(*d);
      return;
    }
    ++exited;
    int code = d->wait_exit(std::chrono::seconds(20));
    EXPECT_GT(code, 0) << d->log();
    EXPECT_LT(code, 128) << "killed by a signal\n" << d->log();
    EXPECT_THAT(d->log(), ::testing::HasSubstr(how.error_text(f)));
    EXPECT_EQ(leftovers(dir), clean);
  });
  std::printf("start: %d runs ended the daemon\n", exited);
}

}  // namespace daqiri::fault
