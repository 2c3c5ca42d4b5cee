// daqiri-gpu-send: daqiri-gen's packets sent from GPU memory through a TX queue with a device
// region. Each frame is made on the host (Ethernet, IPv4, UDP, then daqiri-gen's payload), its
// first header_size bytes written into the buffer's host header slot and the rest copied into
// its GPU buffer, as a program whose kernels make the payloads would leave them.
//   daqiri-gpu-send --socket PATH --interface lo --queue txg --source 127.0.0.1:5000
//                   --dest 127.0.0.1:4096 --size 1000 --count 3000
//   sent 3000 frames from GPU memory (header 64 bytes on the host), 0 failed
// Exit status 0 when every frame went out and came back without a failure.
#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"daqiri-gpu-send: daqiri-gen's packets sent from GPU memory", "daqiri-gpu-send"};
  std::string socket, itf, queue, source = "127.0.0.1:5000", dest = "127.0.0.1:4096";
  uint32_t size = 1000, batch = 32;
  uint64_t count = 1000;
  app.add_option("--socket", socket, "daqirid's control socket")->required();
  app.add_option("--interface", itf, "the interface")->required();
  app.add_option("--queue", queue, "a TX queue with a device region");
  app.add_option("--source", source, "IPV4:PORT the frames come from");
  app.add_option("--dest", dest, "IPV4:PORT they go to");
  app.add_option("--size", size, "UDP payload bytes (24 or more: daqiri-gen's header)");
  app.add_option("--count", count, "frames");
  app.add_option("--batch", batch, "frames per submit")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
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
  o.gpu = true;
  auto tx = client->attach_tx(o);
  if (!tx) {
    std::fprintf(stderr, "attach: %s\n", tx.error().message.c_str());
    return 1;
  }
  auto gpu = daqiri::GpuTxBuffers::map(**tx);
  if (!gpu) {
    std::fprintf(stderr, "map: %s\n", gpu.error().message.c_str());
    return 1;
  }
  const uint32_t frame_bytes = static_cast<uint32_t>(daqiri::frame::kUdpHeaders) + size;
  const uint32_t head = std::min(frame_bytes, (*gpu)->header_size());
  if (frame_bytes > (*tx)->buf_size()) {
    std::fprintf(stderr, "daqiri-gpu-send: a frame of %u bytes is more than the queue's %u\n",
                 frame_bytes, (*tx)->buf_size());
    return 2;
  }
  cudaSetDevice((*gpu)->device());
  cudaStream_t stream = nullptr;
  void* pinned = nullptr;  // one frame per buffer of a batch
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMallocHost(&pinned, uint64_t{frame_bytes} * batch) != cudaSuccess) {
    std::fprintf(stderr, "daqiri-gpu-send: CUDA set-up failed\n");
    return 1;
  }
  auto* staging = static_cast<std::byte*>(pinned);
  std::vector<daqiri::TxBuffer> bufs(batch);
  uint64_t sent = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (sent < count) {
    if (std::chrono::steady_clock::now() > deadline || (*tx)->detached()) break;
    size_t n =
        (*tx)->reserve({bufs.data(), static_cast<size_t>(std::min<uint64_t>(batch, count - sent))});
    if (n == 0) {
      (void)(*tx)->flush(std::chrono::milliseconds(1));  // wait for buffers to come back
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      std::span<std::byte> frame(staging + i * frame_bytes, frame_bytes);
      daqiri::frame::write_udp_headers(frame, src, dst, size);
      daqiri::pattern::fill(frame.subspan(daqiri::frame::kUdpHeaders), dst.port, sent + i);
      std::copy_n(frame.begin(), head, bufs[i].data.begin());  // the host header slot
      if (frame_bytes > head &&
          cudaMemcpyAsync((*gpu)->buffer(bufs[i].index), frame.data() + head, frame_bytes - head,
                          cudaMemcpyHostToDevice, stream) != cudaSuccess) {
        std::fprintf(stderr, "daqiri-gpu-send: cudaMemcpyAsync failed\n");
        return 1;
      }
      bufs[i].length = frame_bytes;
    }
    cudaStreamSynchronize(stream);  // the GPU bytes are in place before the daemon reads them
    auto queued = (*tx)->submit({bufs.data(), n});
    if (!queued || *queued != n) {
      std::fprintf(stderr, "daqiri-gpu-send: submit: %s\n",
                   queued ? "the ring was full" : queued.error().message.c_str());
      return 1;
    }
    sent += n;
  }
  auto flushed = (*tx)->flush(std::chrono::seconds(5));
  std::printf("sent %llu frames from GPU memory (header %u bytes on the host), %llu failed\n",
              static_cast<unsigned long long>(sent), (*gpu)->header_size(),
              static_cast<unsigned long long>((*tx)->failed()));
  cudaFreeHost(pinned);
  cudaStreamDestroy(stream);
  return sent == count && flushed && (*tx)->failed() == 0 ? 0 : 1;
}
