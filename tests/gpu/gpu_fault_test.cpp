// Fault injection on a GPU host: daqirid with libdaqiri-fault-cuda.so preloaded, each of its
// GPU allocations (cuMemCreate, cudaMalloc) and exports (cuMemExportToShareableHandle) that a
// scenario reaches failed in turn, as the driver fails them when GPU memory or fds run out. At
// start the daemon must end saying why and leave nothing behind, or serve; while serving, the
// client whose ring could not be made gets a clean refusal, the daemon gives back every
// attachment, fd and byte of GPU memory, and a GPU client on another flow loses nothing.
// Skipped where there is no GPU (CI); tools/gpu-check runs it on a GPU host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "daqiri/cuda/driver_api.hpp"
#include "fault_injector.hpp"
#include "fault_sweep.hpp"
#include "gpu_daemon_test.hpp"

namespace daqiri::fault {
namespace {

using namespace std::chrono_literals;
using test::DaemonProcess;
using test::Seen;
using test::Spawned;

// The driver's text for a CUresult, as the daemon's messages carry it.
std::string cuda_text(int error) {
  auto api = cuda::DriverApi::get();
  const char* text = nullptr;
  if (!api || (*api)->get_error_string(static_cast<CUresult>(error), &text) != CUDA_SUCCESS) {
    return "CUDA error " + std::to_string(error);
  }
  return text;
}

// `rounds` runs of daqiri-gen's packets 0..count-1, as a receiver sums them.
Seen expected_rounds(uint16_t port, uint64_t count, uint32_t size, uint64_t rounds) {
  Seen one = test::expected(port, count, size);
  return {one.received * rounds,      one.intact * rounds,   one.corrupt * rounds,
          one.payload_bytes * rounds, one.byte_sum * rounds, one.sequence_sum * rounds};
}

std::vector<SiteUse> cuda_sites(const std::vector<SiteUse>& all) {
  std::vector<SiteUse> out;
  for (const auto& s : all) {
    if (is_cuda(s.call)) out.push_back(s);
  }
  return out;
}

class GpuFaultTest : public test::GpuDaemonTest {
 protected:
  // A VMM ring, then a legacy (cudaMalloc'd, cudaIpcMemHandle_t) ring, on stream0: each gets
  // 200 packets intact, or is refused saying why. Returns what neither explains.
  std::string exercise() {
    std::string wrong;
    for (const std::vector<std::string>& style :
         {std::vector<std::string>{}, std::vector<std::string>{"--cuda-ipc", "yes"}}) {
      std::string what = style.empty() ? "VMM ring" : "legacy ring";
      auto rx = spawn_receiver("stream0", 200, style);
      if (rx->wait_for_output("attached:", 20s)) {
        EXPECT_EQ(gen(4096, 200, 1000).exit_code, 0);
        int code = rx->wait(60s);
        if (code != 0 || test::parse(rx->output()) != test::expected(4096, 200, 1000)) {
          wrong += what + ": attached, then did not get 200 packets intact: " + rx->output();
        }
      } else if (int code = rx->wait(20s); code == 0 || !says_why(rx->output(), "attach: ")) {
        wrong += what + ": neither attached nor refused saying why (exit " + std::to_string(code) +
                 "): " + rx->output();
      }
    }
    return wrong;
  }

  FaultInjector faults_{dir_};
};

// Each GPU allocation of ours that starting daqirid reaches (its gpudirect pool), failed in turn:
// the daemon ends non-zero saying why (the driver's text in its log) and leaves nothing behind,
// or starts and delivers.
TEST_F(GpuFaultTest, AFailedGpuAllocationAtStartEndsTheDaemonSayingWhyOrItServes) {
  std::string config = write_config(test::gpudirect_config());
  StartSweep how;
  how.start = [&] {
    return std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config},
                                           faults_.env());
  };
  how.serves = [&](DaemonProcess& d) {
    // net_null's frames are zeros, not daqiri-gen's pattern: counted, every one "corrupt".
    auto rx = spawn_receiver("stream0", 2000, {"--style", "persistent", "--threads", "256"});
    EXPECT_EQ(rx->wait(60s), 1) << rx->output() << d.log();
    EXPECT_EQ(test::parse(rx->output()).received, 2000u) << rx->output();
    EXPECT_EQ(d.stop(), 0) << d.log();
  };
  how.error_text = [](const Fault& f) { return cuda_text(f.error); };
  how.ready_within = 30s;
  auto sites = cuda_sites(start_census(faults_, how));
  print_sites("starting daqirid on a gpudirect pool", sites);
  ASSERT_FALSE(sites.empty()) << "starting daqirid made no GPU allocation the shim saw";
  sweep_start(faults_, sites, dir_.path().string(), how);
}

// Each GPU allocation and export of ours that attaching a GPU ring reaches, failed in turn while
// a GPU client on stream1 receives throughout: the refused client says why, the daemon gives
// back every attachment, fd and byte of GPU memory, and the other client loses nothing.
TEST_F(GpuFaultTest, AFailedGpuAllocationRefusesTheClientAndCostsOthersNothing) {
  start(test::kConfig, faults_.env());
  faults_.arm();
  EXPECT_EQ(exercise(), "");
  faults_.disarm();
  auto sites = cuda_sites(faults_.sites());
  print_sites("attaching GPU rings", sites);
  ASSERT_FALSE(sites.empty()) << "attaching GPU rings made no GPU allocation the shim saw";
  const uint64_t per_round = 200;
  const uint64_t rounds = trials_for(sites).size() + 1;  // the last after the sweep
  auto bystander = spawn_receiver("stream1", per_round * rounds, {}, 600);
  ASSERT_TRUE(bystander->wait_for_output("attached:", 20s)) << bystander->output();
  ASSERT_TRUE(
      control_->eventually([](const v1::Stats& s) { return s.attachments_size() == 1; }, 5s));
  cudaFree(nullptr);  // our own context first, so that it is part of the baseline
  size_t base_fds = test::open_fds(daemon_->pid());
  size_t base_gpu = free_gpu_memory();
  sweep(faults_, sites, "serving", [&](const Fault& f) {
    faults_.arm(f);
    std::string wrong = exercise();
    faults_.disarm();
    EXPECT_EQ(wrong, "");
    EXPECT_EQ(gen(4097, per_round, 512).exit_code, 0);
    EXPECT_TRUE(control_->eventually(
        [&](const v1::Stats& s) {
          return s.attachments_size() == 1 && test::open_fds(daemon_->pid()) <= base_fds &&
                 free_gpu_memory() + (2u << 20) >= base_gpu;
        },
        10s))
        << "fds " << test::open_fds(daemon_->pid()) << " (were " << base_fds << "), free GPU "
        << (free_gpu_memory() >> 20) << " MiB (was " << (base_gpu >> 20) << ")\n"
        << control_->get().DebugString();
    ASSERT_EQ(::kill(daemon_->pid(), 0), 0) << daemon_->log();
  });
  if (HasFatalFailure()) return;
  EXPECT_EQ(gen(4097, per_round, 512).exit_code, 0);
  ASSERT_EQ(bystander->wait(60s), 0) << bystander->output();
  EXPECT_EQ(test::parse(bystander->output()), expected_rounds(4097, per_round, 512, rounds))
      << bystander->output();
}

}  // namespace
}  // namespace daqiri::fault
