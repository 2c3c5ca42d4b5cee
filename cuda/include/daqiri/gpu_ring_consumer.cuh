// A persistent consumer of a GPU ring spread over a grid of blocks (include from .cu files).
// One block checking every byte tops out near one SM's rate; this spreads a stream over as many
// blocks as it needs, each working through its own share of every burst, and hands slots back
// to the daemon in order, from the GPU.
//
//   __global__ void consume(daqiri::GpuRingView r, uint32_t* done, const uint32_t* stop) {
//     daqiri::gpu_ring_consume(r, 0, UINT32_MAX, done, stop, [&](uint32_t c) {
//       ... a whole warp works on packet c: daqiri::gpu_ring_frame(r, c) ...
//     });
//   }
//   consume<<<blocks, threads>>>(view, done /* blocks words, zeroed */, stop);
//
// Packet c (counted from `first`) goes to warp k % W of block (k / W) % B, W warps a block and B
// blocks: a burst is spread over the whole grid. Each block polls the doorbell itself (a load
// at device scope from GPU memory: no system-scope traffic while it waits) and, once its warps
// are done with a burst, says so in done[block]. Block 0's thread 0 releases the lowest of
// those to the daemon (after each of its bursts and while it waits), one store to host memory
// a burst at most, so releases stay in order. Every block must be resident at once (a
// persistent grid: at most what the GPU runs side by side).
//
// gpu_ring_loop is the other shape: a kernel that consumes the bursts that are there and is run
// again by a CUDA graph loop (daqiri/gpu_graph_loop.hpp) instead of running for the whole
// stream.
#pragma once

#include <cuda/atomic>

#include "daqiri/gpu_ring.cuh"

namespace daqiri {

namespace detail {

// Loads at device scope: the doorbell (gpu_ring_producer) and the blocks' progress words.
__device__ inline uint32_t device_load(const uint32_t* p) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> a(*const_cast<uint32_t*>(p));
  return a.load(cuda::memory_order_acquire);
}

__device__ inline void device_store(uint32_t* p, uint32_t v) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> a(*p);
  a.store(v, cuda::memory_order_release);
}

__device__ inline bool counter_before(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) < 0;
}

// *stop is host memory: each read crosses PCIe. A poller looks at it once every 256 spins
// (tens of microseconds), not on every spin, so waiting blocks put no load on the bus.
__device__ inline bool stop_requested(const volatile uint32_t* stop, uint32_t spins) {
  return (spins & 255u) == 0 && *stop != 0;
}

// Block 0, thread 0: the lowest counter every block is done with, released if it moved.
template <typename Ring>
__device__ void release_done(const Ring& r, const uint32_t* done, uint32_t first,
                             uint32_t& released) {
  uint32_t low = device_load(&done[0]);
  for (uint32_t b = 1; b < gridDim.x; ++b) {
    uint32_t d = device_load(&done[b]);
    if (counter_before(d - first, low - first)) low = d;
  }
  if (low != released) {
    gpu_ring_release(r, low);
    released = low;
  }
}

}  // namespace detail

// Consumes ring counters [first, last) of a GPU ring (GpuRingView) or of a host ring mapped
// for the GPU (MappedRxRingView, daqiri/mapped_rx_ring.cuh); last == first + count
// (UINT32_MAX-style open ends are fine: it also returns when *stop becomes non-zero). `done`:
// gridDim.x words in device memory, each set to `first` before the launch. `fn(counter)` is called
// by all 32 lanes of one warp. Every thread of every block calls this.
template <typename Ring, typename Fn>
__device__ void gpu_ring_consume(const Ring& r, uint32_t first, uint32_t last, uint32_t* done,
                                 const volatile uint32_t* stop, Fn&& fn) {
  const uint32_t warp = threadIdx.x / 32;
  const uint32_t warps = blockDim.x / 32;
  const uint64_t grid_warps = uint64_t{warps} * gridDim.x;
  const uint64_t mine = uint64_t{blockIdx.x} * warps + warp;  // my warp's place in the grid
  const bool releaser = blockIdx.x == 0 && threadIdx.x == 0;
  __shared__ uint32_t shared_p;
  uint32_t seen = first;
  uint64_t at = 0;  // packets before `seen`, counted from `first` (no wrap in 64 bits)
  uint32_t released = first;
  while (seen != last) {
    if (threadIdx.x == 0) {
      uint32_t p;
      for (uint32_t spins = 1;; ++spins) {
        p = gpu_ring_producer(r);
        if (p != seen || detail::stop_requested(stop, spins)) break;
        if (releaser) detail::release_done(r, done, first, released);
        __nanosleep(64);
      }
      shared_p = detail::counter_before(last - first, p - first) ? last : p;
    }
    __syncthreads();
    uint32_t p = shared_p;
    if (p == seen) break;  // stopped
    // My warp's packets of [seen, p): the first k >= at with k % grid_warps == mine, then every
    // grid_warps-th.
    uint64_t end = at + (p - seen);
    uint64_t k = at + (mine + grid_warps - at % grid_warps) % grid_warps;
    for (; k < end; k += grid_warps)
      fn(first + static_cast<uint32_t>(k));
    __syncthreads();  // every read of this block's packets of [seen, p) done
    if (threadIdx.x == 0) {
      __threadfence();
      detail::device_store(&done[blockIdx.x], p);
      // Also after each burst, not only while waiting: under a steady stream block 0 may never
      // wait, and slots it does not release are slots the daemon cannot fill.
      if (releaser) detail::release_done(r, done, first, released);
    }
    seen = p;
    at = end;
  }
  // The last bursts' releases: block 0 waits for every block to finish what it saw.
  if (releaser) {
    for (uint32_t spins = 1;; ++spins) {
      detail::release_done(r, done, first, released);
      if (released == seen || detail::stop_requested(stop, spins)) break;
      __nanosleep(64);
    }
  }
}

// One run of a graph loop's kernel (daqiri/gpu_graph_loop.hpp) over bursts of gridDim.x
// packets: block b works on counter next + k * gridDim.x + b of every burst k of the run (fn
// is called by every thread of that block). Block 0's thread 0 waits for at least one whole
// burst behind the doorbell (device scope, as above) and takes every whole burst that is there,
// up to max_bursts, and tells the other blocks (a word in device memory they poll): a run is
// one burst under a light load, low latency, and many under a heavy one, so that the loop's
// relaunch is paid once per many bursts. The last block to finish releases what the run took,
// moves `next` on and sets the loop's condition: run again until `last`, or until the host
// sets *stop. (last - first) must be a multiple of gridDim.x; all blocks resident at once.
template <typename Fn>
__device__ void gpu_ring_loop(const GpuRingView& r, GpuRingLoop* s, const volatile uint32_t* stop,
                              cudaGraphConditionalHandle loop, Fn&& fn) {
  __shared__ uint32_t run_first, run_bursts;
  const uint32_t burst = gridDim.x;
  if (threadIdx.x == 0) {
    const uint32_t first = s->next;  // written by the previous run: a kernel boundary orders it
    uint32_t bursts = 0;
    if (blockIdx.x == 0) {
      for (uint32_t spins = 1;; ++spins) {
        uint32_t ready = (gpu_ring_producer(r) - first) / burst;
        if (ready != 0) {
          bursts = min(min(ready, s->max_bursts), (s->last - first) / burst);
          break;
        }
        if (detail::stop_requested(stop, spins)) break;  // bursts 0: nothing more released
        __nanosleep(64);
      }
      s->bursts = bursts;
      detail::device_store(&s->decided, first);  // release: `bursts` before it
    } else {
      while (detail::device_load(&s->decided) != first)
        __nanosleep(32);
      bursts = detail::device_load(&s->bursts);
    }
    run_first = first;
    run_bursts = bursts;
  }
  __syncthreads();
  for (uint32_t k = 0; k < run_bursts; ++k)
    fn(run_first + k * burst + blockIdx.x);
  __syncthreads();  // every read of this block's packets done
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&s->arrived, 1u) == burst - 1) {  // the last block of this run
      __threadfence();
      s->arrived = 0;
      const uint32_t end = run_first + run_bursts * burst;
      if (run_bursts != 0) {
        gpu_ring_release(r, end);
        s->next = end;
      }
      cudaGraphSetConditional(loop, run_bursts != 0 && end != s->last ? 1u : 0u);
    }
  }
}

}  // namespace daqiri
