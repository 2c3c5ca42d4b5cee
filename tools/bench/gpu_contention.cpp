// gpu-contention: what a second process's running kernel costs each kind of GPU work a daemon
// could do for a client, without MPS. A child process (its own CUDA context, as a client is)
// first idles, then runs a one-thread persistent kernel; meanwhile this process times, from
// enqueue to its event completing, each kind of work a delivery can be made of: a one-thread
// kernel, a host-to-device copy, a pitched copy, a batch of copies, a stream memory write (the
// doorbell), a copy followed by the doorbell, two such on two streams, the second doorbell
// waiting for the first (an event), and one frame delivered as the engine does it, its
// descriptor copied or written in the doorbell's batch of memory operations. It also says whether
// the GPU can map host memory that is read-only to the process (cudaHostRegisterReadOnly), what a
// client-side copy from a read-only memfd mapping needs.
//   gpu-contention [SAMPLES [GAP_US]]     (GAP_US: the GPU left idle before each sample)
// Prints "contention PHASE WORK p50 A p99 B max C" (microseconds) for PHASE idle and busy, and
// "host-register-read-only supported S works W".
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda_owned.hpp"
#include "daqiri/common/mapping.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/cuda/driver_api.hpp"
#include "latency_kernels.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace daqiri::bench;

// The child: waits for 'g', runs a persistent kernel until 's', then exits. Answers each
// command with one byte once it took effect.
int child(int commands, int answers) {
  PinnedMemory<uint32_t> stop;
  DeviceMemory<uint64_t> seen;
  Stream stream;
  if (!cuda_ok(pinned_alloc(stop, sizeof(uint32_t), cudaHostAllocMapped), "child alloc") ||
      !cuda_ok(device_alloc(seen, sizeof(uint64_t)), "child alloc") ||
      !cuda_ok(make_stream(stream), "child stream")) {
    return 1;
  }
  *stop = 0;
  uint32_t* stop_device = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&stop_device), stop.get(), 0);
  char c = 0;
  char ok = 'k';
  // Loads the kernel's module before anything waits on it.
  if (!cuda_ok(launch_stamp(seen.get(), 0, stream.get()), "child warm-up")) return 1;
  cudaStreamSynchronize(stream.get());
  if (::write(answers, &ok, 1) != 1) return 1;
  while (::read(commands, &c, 1) == 1) {
    if (c == 'g') {
      if (!cuda_ok(launch_persistent_waiter(stop_device, true, seen.get(), 1, stream.get()),
                   "child kernel")) {
        return 1;
      }
    } else if (c == 's') {
      __atomic_store_n(stop.get(), 1, __ATOMIC_RELEASE);
      cudaStreamSynchronize(stream.get());
      *stop = 0;
    }
    if (::write(answers, &ok, 1) != 1) return 1;
  }
  return 0;
}

struct Work {
  std::string name;
  std::function<bool(cudaStream_t)> enqueue;
};

void report(const char* phase, const std::string& work, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  std::printf("contention %s %s p50 %.1f p99 %.1f max %.1f\n", phase, work.c_str(),
              us[us.size() / 2], us[us.size() * 99 / 100], us.back());
}

bool measure(const char* phase, const std::vector<Work>& works, cudaStream_t stream,
             cudaEvent_t event, uint32_t samples, double gap_us) {
  for (const Work& w : works) {
    std::vector<double> us;
    for (uint32_t i = 0; i < samples + 10; ++i) {
      if (gap_us > 0) {
        auto until = Clock::now() + std::chrono::duration<double, std::micro>(gap_us);
        while (Clock::now() < until) {
        }
      }
      auto t0 = Clock::now();
      if (!w.enqueue(stream)) break;  // said why on stderr; the other rows still run
      if (!cuda_ok(cudaEventRecord(event, stream), "record")) return false;
      cudaError_t e = cudaEventQuery(event);
      while (e == cudaErrorNotReady)
        e = cudaEventQuery(event);
      if (!cuda_ok(e, w.name.c_str())) return false;
      if (i >= 10)
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (us.size() < samples) {
      std::printf("contention %s %s refused\n", phase, w.name.c_str());
      continue;
    }
    report(phase, w.name, us);
  }
  return true;
}

// Maps a memfd read-only, registers it for the GPU read-only, and copies it to the device.
void probe_read_only_registration() {
  int supported = 0;
  cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterReadOnlySupported, 0);
  constexpr size_t kBytes = 2 << 20;
  bool works = false;
  daqiri::UniqueFd fd(::memfd_create("gpu-contention", MFD_CLOEXEC));
  if (fd && ::ftruncate(fd.get(), kBytes) == 0) {
    void* p = ::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (p != MAP_FAILED) {
      cudaError_t e =
          cudaHostRegister(p, kBytes, cudaHostRegisterMapped | cudaHostRegisterReadOnly);
      if (e == cudaSuccess) {
        DeviceMemory<char> d;
        works = device_alloc(d, kBytes) == cudaSuccess &&
                cudaMemcpy(d.get(), p, kBytes, cudaMemcpyDefault) == cudaSuccess;
        cudaHostUnregister(p);
      } else {
        std::fprintf(stderr, "read-only registration: %s\n", cudaGetErrorString(e));
        cudaGetLastError();
      }
      ::munmap(p, kBytes);
    }
  }
  std::printf("host-register-read-only supported %d works %d\n", supported, works ? 1 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t samples = argc > 1 ? static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 500;
  double gap_us = argc > 2 ? std::strtod(argv[2], nullptr) : 0;  // idle time before each sample
  int commands[2];
  int answers[2];
  if (::pipe(commands) != 0 || ::pipe(answers) != 0) return 1;
  pid_t pid = ::fork();  // before this process touches CUDA
  if (pid == 0) {
    ::close(commands[1]);
    ::close(answers[0]);
    ::_exit(child(commands[0], answers[1]));
  }
  ::close(commands[0]);
  ::close(answers[1]);
  auto tell = [&](char c) {
    char a = 0;
    return ::write(commands[1], &c, 1) == 1 && ::read(answers[0], &a, 1) == 1;
  };
  auto api = daqiri::cuda::DriverApi::get();
  if (!api) {
    std::fprintf(stderr, "driver: %s\n", api.error().message.c_str());
    return 1;
  }
  constexpr size_t kBurst = 32;
  constexpr size_t kFrame = 1024;
  constexpr size_t kPitch = 1792;
  PinnedMemory<char> host;
  DeviceMemory<char> device;
  DeviceMemory<uint64_t> stamps;
  Stream stream, other;
  Event event, other_done;
  if (!cuda_ok(pinned_alloc(host, kBurst * kPitch, cudaHostAllocPortable), "alloc") ||
      !cuda_ok(device_alloc(device, 4 * kBurst * kPitch + 64), "alloc") ||
      !cuda_ok(device_alloc(stamps, sizeof(uint64_t)), "alloc") ||
      !cuda_ok(make_stream(stream), "stream") || !cuda_ok(make_event(event), "event") ||
      !cuda_ok(make_stream(other), "stream") || !cuda_ok(make_event(other_done), "event")) {
    return 1;
  }
  auto doorbell = reinterpret_cast<CUdeviceptr>(device.get() + kBurst * kPitch);
  uint32_t bell = 0;
  std::vector<void*> dsts(kBurst);
  std::vector<const void*> srcs(kBurst);
  std::vector<size_t> sizes(kBurst, kFrame);
  for (size_t i = 0; i < kBurst; ++i) {
    dsts[i] = device.get() + i * kPitch;
    srcs[i] = host.get() + i * kPitch;
  }
  auto write_doorbell = [&](cudaStream_t s) {
    return (*api)->stream_write_value32(reinterpret_cast<CUstream>(s), doorbell, ++bell,
                                        CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS;
  };
  auto copy_of = [&](size_t bytes) {
    return [&, bytes](cudaStream_t s) {
      return cudaMemcpyAsync(device.get(), host.get(), bytes, cudaMemcpyHostToDevice, s) ==
             cudaSuccess;
    };
  };
  // Pitched copies: rows of `width` at kPitch, from host memory or (`d2d`) device memory.
  auto copy2d_of = [&](size_t width, size_t rows, bool d2d) {
    return [&, width, rows, d2d](cudaStream_t s) {
      const char* src = d2d ? device.get() + 2 * kBurst * kPitch : host.get();
      return cudaMemcpy2DAsync(device.get(), kPitch, src, kPitch, width, rows, cudaMemcpyDefault,
                               s) == cudaSuccess;
    };
  };
  auto d2d_of = [&](size_t bytes) {
    return [&, bytes](cudaStream_t s) {
      return cudaMemcpyAsync(device.get(), device.get() + bytes, bytes, cudaMemcpyDeviceToDevice,
                             s) == cudaSuccess;
    };
  };
  auto copy = copy_of(kBurst * kFrame);
  auto frame = [&](cudaStream_t s) {
    return cudaMemcpy2DAsync(device.get(), kFrame / 2, host.get(), kFrame / 2, kFrame / 2, 2,
                             cudaMemcpyHostToDevice, s) == cudaSuccess;
  };
  char* descriptor = device.get() + 3 * kBurst * kPitch;
  CUstreamBatchMemOpParams memops[5] = {};
  auto descriptor_and_bell = [&] {
    for (int w = 0; w < 4; ++w) {
      memops[w] = {};
      memops[w].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      memops[w].writeValue.address = reinterpret_cast<CUdeviceptr>(descriptor) + CUdeviceptr{8} * w;
      memops[w].writeValue.value64 = 0x0123456789abcdefULL + w;
      memops[w].writeValue.flags = CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
    }
    memops[4] = {};
    memops[4].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    memops[4].writeValue.address = doorbell;
    memops[4].writeValue.value = ++bell;
    memops[4].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    return memops;
  };
  // The driver's reason goes to stderr: a refused batch is itself a finding.
  auto batch_mem_op = [&](cudaStream_t s, CUstreamBatchMemOpParams* ops, unsigned count) {
    CUresult r = (*api)->stream_batch_mem_op(reinterpret_cast<CUstream>(s), count, ops, 0);
    if (r != CUDA_SUCCESS) {
      const char* text = nullptr;
      (*api)->get_error_string(r, &text);
      std::fprintf(stderr, "cuStreamBatchMemOp(%u ops): %d %s\n", count, static_cast<int>(r),
                   text != nullptr ? text : "?");
    }
    return r == CUDA_SUCCESS;
  };
  int can64 = 0;
  CUdevice dev = 0;
  if ((*api)->device_get(&dev, 0) == CUDA_SUCCESS)
    (*api)->device_get_attribute(&can64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev);
  std::printf("can-use-64-bit-stream-mem-ops %d\n", can64);
  std::vector<Work> works = {
      {"kernel", [&](cudaStream_t s) { return launch_stamp(stamps.get(), 0, s) == cudaSuccess; }},
      {"copy-48B", copy_of(48)},
      {"copy-1KiB", copy_of(1024)},
      {"copy-4KiB", copy_of(4096)},
      {"copy-16KiB", copy_of(16384)},
      {"copy-32KiB", copy},
      {"copy-2d-1x48", copy2d_of(48, 1, false)},
      {"copy-2d-1x1024", copy2d_of(1024, 1, false)},
      {"copy-2d-4x1024", copy2d_of(1024, 4, false)},
      {"d2d-1KiB", d2d_of(1024)},
      {"d2d-64KiB", d2d_of(65536)},
      {"d2d-2d-1x1024", copy2d_of(1024, 1, true)},
      {"d2d-2d-32x1024", copy2d_of(1024, 32, true)},
      {"copy-2d-32x1024",
       [&](cudaStream_t s) {
         return cudaMemcpy2DAsync(device.get(), kPitch, host.get(), kPitch, kFrame, kBurst,
                                  cudaMemcpyHostToDevice, s) == cudaSuccess;
       }},
      {"batch-32x1024",
       [&](cudaStream_t s) {
         cudaMemcpyAttributes attr{};
         attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
         size_t index = 0;
         return cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), kBurst, &attr, &index,
                                     1, s) == cudaSuccess;
       }},
      {"doorbell", write_doorbell},
      {"copy-then-doorbell", [&](cudaStream_t s) { return copy(s) && write_doorbell(s); }},
      // The engine's two streams: this burst's copy waits for nothing, its doorbell for the
      // previous burst's, which was rung on the other stream.
      {"copy-then-doorbell-after-other-stream",
       [&](cudaStream_t s) {
         return copy(other.get()) && write_doorbell(other.get()) &&
                cudaEventRecord(other_done.get(), other.get()) == cudaSuccess && copy(s) &&
                cudaStreamWaitEvent(s, other_done.get(), 0) == cudaSuccess && write_doorbell(s);
       }},
      // One 1 KiB frame as the engine delivers it (two rows of 512 B, on the copy engines),
      // then its 32-byte descriptor copied (two rows of 16 B) and the doorbell, or the
      // descriptor written as four 64-bit values in one batch with the doorbell.
      {"frame-descriptor-copy-doorbell",
       [&](cudaStream_t s) {
         return frame(s) &&
                cudaMemcpy2DAsync(descriptor, 16, host.get() + kFrame, 16, 16, 2,
                                  cudaMemcpyHostToDevice, s) == cudaSuccess &&
                write_doorbell(s);
       }},
      {"frame-descriptor-written-doorbell",
       [&](cudaStream_t s) { return frame(s) && batch_mem_op(s, descriptor_and_bell(), 5); }},
      {"doorbell-batch",
       [&](cudaStream_t s) { return batch_mem_op(s, descriptor_and_bell() + 4, 1); }},
      {"write64-batch",
       [&](cudaStream_t s) {
         CUstreamBatchMemOpParams* op = descriptor_and_bell();
         op->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
         return batch_mem_op(s, op, 1);
       }},
      {"write64-no-barrier-batch",
       [&](cudaStream_t s) { return batch_mem_op(s, descriptor_and_bell(), 1); }},
      {"write64-no-barrier-4-batch",
       [&](cudaStream_t s) { return batch_mem_op(s, descriptor_and_bell(), 4); }},
      {"kernel-then-doorbell",
       [&](cudaStream_t s) {
         return launch_stamp(stamps.get(), 0, s) == cudaSuccess && write_doorbell(s);
       }},
  };
  probe_read_only_registration();
  char ready = 0;  // the child's context is up and its kernel loaded
  bool ok = ::read(answers[0], &ready, 1) == 1;
  ok = ok && measure("idle", works, stream.get(), event.get(), samples, gap_us);
  ok = ok && tell('g');
  ok = ok && measure("busy", works, stream.get(), event.get(), samples, gap_us);
  ok = ok && tell('s');
  ::close(commands[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
