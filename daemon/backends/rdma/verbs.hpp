// Owning handles for the rdma-core objects the backend creates: each frees its object with the
// matching destroy call, in the order members are declared in reverse.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <memory>

namespace daqiri::backends::rdma {

template <typename T, auto Destroy>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p != nullptr) (void)Destroy(p);
  }
};

using EventChannel = std::unique_ptr<rdma_event_channel,
                                     VerbsDeleter<rdma_event_channel, rdma_destroy_event_channel>>;
using CmId = std::unique_ptr<rdma_cm_id, VerbsDeleter<rdma_cm_id, rdma_destroy_id>>;
using ProtectionDomain = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>>;
using CompletionChannel =
    std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_comp_channel, ibv_destroy_comp_channel>>;
using CompletionQueue = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>>;
using MemoryRegistration = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>>;

}  // namespace daqiri::backends::rdma
