// daqiri-gpu-send: daqiri-gen's packets sent from GPU memory through a TX queue with a device
// region. Each frame is made on the host (Ethernet, IPv4, UDP, then daqiri-gen's payload), its
// first header_size bytes written into the buffer's host header slot and the rest copied into
// its GPU buffer, as a program whose kernels make the payloads would leave them.
//   daqiri-gpu-send --socket PATH --interface lo --queue txg --source 127.0.0.1:5000
//                   --dest 127.0.0.1:4096 --size 1000 --count 3000
//   sent 3000 frames from GPU memory (header 64 bytes on the host), 0 failed in 0.012 s: 0.25 Mpps
// --prefill writes every buffer's frame once before sending (sequence = buffer index), so that
// a frame then costs the sender only its descriptor: what tools/bench/run-gpu-tx times. --host
// does the same through a queue of host memory (TxOptions without gpu), its peer.
// Exit status 0 when every frame went out and came back without a failure.
#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/frame.hpp"
#include "daqiri/gpu_tx_buffers.hpp"
#include "daqiri/test_pattern.hpp"
#include "gpu_attach.hpp"

namespace {

bool parse_endpoint(const std::string& text, daqiri::frame::UdpEndpoint& out) {
  auto colon = text.rfind(':');
  in_addr a{};
  if (colon == std::string::npos || ::inet_pton(AF_INET, text.substr(0, colon).c_str(), &a) != 1) {
    return false;
  }
  out.ipv4 = ntohl(a.s_addr);
  out.port = static_cast<uint16_t>(std::stoul(text.substr(colon + 1)));
  return true;
}

// Where a buffer's frame goes: its host part (header, or all of it for --host) and, from GPU
// memory, the rest through a pinned staging frame.
class FrameWriter {
 public:
  FrameWriter(const daqiri::GpuTxBuffers* gpu, uint32_t frame_bytes, uint32_t batch)
      : gpu_(gpu), frame_bytes_(frame_bytes) {
    head_ = gpu ? std::min(frame_bytes, gpu->header_size()) : frame_bytes;
    if (gpu == nullptr) return;
    cudaSetDevice(gpu->device());
    ok_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess &&
          cudaMallocHost(&pinned_, uint64_t{frame_bytes} * batch) == cudaSuccess;
  }
  ~FrameWriter() {
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  // Frame `seq` into buffer `b` (the `slot`th of its batch).
  bool write(const daqiri::TxBuffer& b, size_t slot, const daqiri::frame::UdpEndpoint& src,
             const daqiri::frame::UdpEndpoint& dst, uint64_t seq) {
    std::span<std::byte> frame;
    if (gpu_ != nullptr) {
      frame = {static_cast<std::byte*>(pinned_) + slot * frame_bytes_, frame_bytes_};
    } else {
      frame = b.data.first(frame_bytes_);
    }
    uint32_t size = frame_bytes_ - static_cast<uint32_t>(daqiri::frame::kUdpHeaders);
    daqiri::frame::write_udp_headers(frame, src, dst, size);
    daqiri::pattern::fill(frame.subspan(daqiri::frame::kUdpHeaders), dst.port, seq);
    if (gpu_ == nullptr) return true;
    std::copy_n(frame.begin(), head_, b.data.begin());  // the host header slot
    return frame_bytes_ == head_ ||
           cudaMemcpyAsync(gpu_->buffer(b.index), frame.data() + head_, frame_bytes_ - head_,
                           cudaMemcpyHostToDevice, stream_) == cudaSuccess;
  }
  // The GPU bytes are in place before the daemon reads them.
  void finish() const {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  }
  [[nodiscard]] uint32_t head() const { return head_; }

 private:
  const daqiri::GpuTxBuffers* gpu_;
  uint32_t frame_bytes_;
  uint32_t head_ = 0;
  bool ok_ = true;
  cudaStream_t stream_ = nullptr;
  void* pinned_ = nullptr;
};

}  // namespace

// --host --prefill writes at most this many buffers (a bench config's region has fewer).
constexpr size_t kMostHostBuffers = 65536;

int main(int argc, char** argv) {
  CLI::App app{"daqiri-gpu-send: daqiri-gen's packets sent from GPU memory", "daqiri-gpu-send"};
  std::string socket, itf, queue, source = "127.0.0.1:5000", dest = "127.0.0.1:4096";
  uint32_t size = 1000, batch = 32;
  uint64_t count = 1000;
  bool prefill = false, host = false;
  app.add_option("--socket", socket, "daqirid's control socket")->required();
  app.add_option("--interface", itf, "the interface")->required();
  app.add_option("--queue", queue, "a TX queue with a device region");
  app.add_option("--source", source, "IPV4:PORT the frames come from");
  app.add_option("--dest", dest, "IPV4:PORT they go to");
  app.add_option("--size", size, "UDP payload bytes (24 or more: daqiri-gen's header)");
  app.add_option("--count", count, "frames");
  app.add_option("--batch", batch, "frames per submit")->check(CLI::Range(1, 1024));
  app.add_flag("--prefill", prefill, "write each buffer's frame once, then send descriptors only");
  app.add_flag("--host", host, "through a queue of host memory instead (implies --prefill)");
  CLI11_PARSE(app, argc, argv);
  prefill |= host;
  daqiri::frame::UdpEndpoint src, dst;
  if (!parse_endpoint(source, src) || !parse_endpoint(dest, dst) ||
      size < daqiri::pattern::kHeaderSize) {
    std::fprintf(stderr, "daqiri-gpu-send: bad --source, --dest or --size\n");
    return 2;
  }
  auto client = daqiri::example::connect_to(socket, "daqiri-gpu-send");
  if (!client) return 1;
  daqiri::TxOptions o;
  o.interface = itf;
  o.queue = queue;
  o.gpu = !host;
  auto tx = client->attach_tx(o);
  if (!tx) {
    std::fprintf(stderr, "attach: %s\n", tx.error().message.c_str());
    return 1;
  }
  std::unique_ptr<daqiri::GpuTxBuffers> gpu;
  if (!host) {
    auto mapped = daqiri::GpuTxBuffers::map(**tx);
    if (!mapped) {
      std::fprintf(stderr, "map: %s\n", mapped.error().message.c_str());
      return 1;
    }
    gpu = std::move(*mapped);
  }
  const uint32_t frame_bytes = static_cast<uint32_t>(daqiri::frame::kUdpHeaders) + size;
  if (frame_bytes > (*tx)->buf_size()) {
    std::fprintf(stderr, "daqiri-gpu-send: a frame of %u bytes is more than the queue's %u\n",
                 frame_bytes, (*tx)->buf_size());
    return 2;
  }
  FrameWriter writer(gpu.get(), frame_bytes, batch);
  if (!writer.ok()) {
    std::fprintf(stderr, "daqiri-gpu-send: CUDA set-up failed\n");
    return 1;
  }
  std::vector<daqiri::TxBuffer> bufs(batch);
  if (prefill) {
    // Every buffer once, its frame numbered by the buffer.
    std::vector<daqiri::TxBuffer> all(gpu ? gpu->count() : kMostHostBuffers);
    size_t n = (*tx)->reserve(all);
    for (size_t i = 0; i < n; ++i) {
      if (!writer.write(all[i], i % batch, src, dst, all[i].index)) return 1;
      if (i % batch == batch - 1) writer.finish();
    }
    writer.finish();
    // Back to the stream, unsent: submitted as they come round below.
    for (size_t i = 0; i < n; ++i)
      all[i].length = frame_bytes;
    bufs = std::move(all);
    bufs.resize(n);
  }
  uint64_t sent = 0;
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::seconds(60);
  std::vector<daqiri::TxBuffer> free_bufs = prefill ? bufs : std::vector<daqiri::TxBuffer>{};
  std::vector<daqiri::TxBuffer> back(prefill ? bufs.size() : 0);  // what reserve() returns
  std::vector<daqiri::TxBuffer> pending;  // written, not yet taken by the TX ring
  pending.reserve(batch);
  while (sent < count) {
    if (std::chrono::steady_clock::now() > deadline || (*tx)->detached()) break;
    size_t want = std::min<uint64_t>(batch, count - sent);
    if (pending.empty() && prefill) {
      // Buffers written once: take those back from the daemon and send them again as they are.
      if (free_bufs.size() < want) {
        size_t got = (*tx)->reserve(back);
        for (size_t i = 0; i < got; ++i) {
          back[i].length = frame_bytes;
          free_bufs.push_back(back[i]);
        }
      }
      size_t n = std::min(want, free_bufs.size());
      pending.assign(free_bufs.end() - static_cast<long>(n), free_bufs.end());
      free_bufs.resize(free_bufs.size() - n);
    } else if (pending.empty()) {
      pending.resize(want);
      pending.resize((*tx)->reserve(pending));
      for (size_t i = 0; i < pending.size(); ++i) {
        if (!writer.write(pending[i], i, src, dst, sent + i)) {
          std::fprintf(stderr, "daqiri-gpu-send: cudaMemcpyAsync failed\n");
          return 1;
        }
        pending[i].length = frame_bytes;
      }
      writer.finish();
    }
    if (pending.empty()) {
      (void)(*tx)->flush(std::chrono::milliseconds(1));  // wait for buffers to come back
      continue;
    }
    auto queued = (*tx)->submit(pending);
    if (!queued) {
      std::fprintf(stderr, "daqiri-gpu-send: submit: %s\n", queued.error().message.c_str());
      return 1;
    }
    // A full TX ring takes fewer: the rest goes with the next submit.
    pending.erase(pending.begin(), pending.begin() + static_cast<long>(*queued));
    sent += *queued;
  }
  // Every buffer back: the written-once ones come back to us, the others to the stream.
  bool flushed = false;
  if (prefill) {
    size_t held = free_bufs.size() + pending.size();
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (held < bufs.size() && std::chrono::steady_clock::now() < until && !(*tx)->detached()) {
      size_t got = (*tx)->reserve(back);
      held += got;
      if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    flushed = held == bufs.size();
  } else {
    flushed = (*tx)->flush(std::chrono::seconds(5)).has_value();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "sent %llu frames from %s memory (header %u bytes on the host), %llu failed in "
      "%.3f s: %.3f Mpps\n",
      static_cast<unsigned long long>(sent), host ? "host" : "GPU", writer.head(),
      static_cast<unsigned long long>((*tx)->failed()), seconds, sent / seconds / 1e6);
  return sent == count && flushed && (*tx)->failed() == 0 ? 0 : 1;
}
