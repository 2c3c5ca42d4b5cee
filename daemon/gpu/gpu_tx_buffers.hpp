// The GPU buffers of a GPU TX client (dataplane::GpuTxBuffers): one VMM allocation on its GPU,
// zeroed, exported once as the POSIX fd the client maps. Where the NIC reads the payloads in
// place (a gpudirect region), the allocation is one a NIC may DMA from.
#pragma once

#include "dataplane/tx_attachment.hpp"
#include "gpu/gpu_device.hpp"

namespace daqiri::gpu {

// `count` buffers of `slot_size` bytes; `header_size`: the host part of each frame (header-data
// split), or 0.
Result<dataplane::GpuTxBuffers> make_gpu_tx_buffers(const GpuDevice& gpu, uint32_t count,
                                                    uint32_t slot_size, uint32_t header_size,
                                                    bool nic_reads);

}  // namespace daqiri::gpu
