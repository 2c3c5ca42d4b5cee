// libdaqiri_gpu: send frames whose bytes are in GPU memory.
//
//   daqiri::TxOptions o;  o.interface = "lo";  o.queue = "tx_gpu";  o.gpu = true;
//   auto* tx = *client->attach_tx(o);
//   auto gpu = daqiri::GpuTxBuffers::map(*tx);
//   daqiri::TxBuffer b;
//   tx->reserve({&b, 1});
//   write_headers(b.data);                                   // host: the first header_size()
//   my_kernel<<<..., stream>>>((*gpu)->buffer(b.index));      // GPU: the rest of the frame
//   cudaStreamSynchronize(stream);                            // complete before the submit
//   b.length = frame_bytes;  tx->submit({&b, 1});
//
// A TX queue with a device region (and, for header-data split, a host header region first)
// gives GPU buffers: buffer i of the TxStream is the host header buffer TxBuffer::data (empty
// without a split) followed by GPU buffer i. The daemon copies both out when the frame is
// submitted and hands the buffer back through reclaim() as usual. The GPU memory is mapped
// for the GPU the daemon made it on, found by UUID; the caller's current device and context
// are left as they were. After Client::reconnect() the stream has new GPU buffers: map again.
#pragma once

#include <memory>

#include "daqiri/client.hpp"

namespace daqiri {

class GpuTxBuffers {
 public:
  // Maps a GPU TX stream's GPU buffers (TxOptions::gpu); kInvalidArgument for another stream.
  static Result<std::unique_ptr<GpuTxBuffers>> map(const TxStream& stream);
  ~GpuTxBuffers();
  GpuTxBuffers(const GpuTxBuffers&) = delete;
  GpuTxBuffers& operator=(const GpuTxBuffers&) = delete;

  // Where buffer `index` (TxBuffer::index) holds the frame's bytes past header_size(): a
  // device pointer, buffer_size() bytes; nullptr for an index out of range.
  [[nodiscard]] void* buffer(uint32_t index) const;
  [[nodiscard]] uint32_t buffer_size() const;
  [[nodiscard]] uint32_t count() const;
  // Bytes of each frame in the host buffer (header-data split), 0 when frames are whole here.
  [[nodiscard]] uint32_t header_size() const;
  // The CUDA device ordinal, in this process, of the GPU holding the buffers.
  [[nodiscard]] int device() const;

  struct State;

 private:
  explicit GpuTxBuffers(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri
