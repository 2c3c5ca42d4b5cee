/* daqiri shared-memory ABI, version DAQIRI_ABI_VERSION (below): the whole contract between
 * daqirid and its clients.
 *
 * C-compatible, dependency-free, compiled by the daemon and by every client. docs/protocol.md
 * explains it in prose; this header is the authority. Every size and offset is asserted.
 *
 * RINGS. A ring is a header followed by `size` descriptors of `desc_size` bytes, size a power
 * of two. `producer` and `consumer` are free-running uint32 counters (they wrap at 2^32); slot
 * of counter c is c & (size - 1); the ring holds producer - consumer entries (0 .. size).
 * Each index has exactly one writer, on its own cache line:
 *   producer side: write descriptors [p, p+n) -> store-release producer = p+n
 *   consumer side: load-acquire producer -> read descriptors [c, p) -> store-release consumer
 *   producer side: load-acquire consumer before reusing the slots it frees
 * daqirid never trusts a client-written value: it keeps its own shadow copy of every index and
 * descriptor it produced, bounds-checks every index and descriptor a client wrote, reads each
 * descriptor once into private memory before using it, and cuts off a client that lies.
 *
 * WAKEUPS. A consumer that wants to sleep sets DAQIRI_RING_NEED_WAKEUP in `consumer_flags`,
 * re-reads `producer` (both seq_cst, so that a producer cannot miss the flag), and waits on the
 * attachment's eventfd. The producer, after publishing (seq_cst), signals the eventfd only when
 * the flag is set. (On RX rings daqirid publishes with release only and makes up for it by
 * looking again on later polls, fenced once a poll publishes nothing: docs/protocol.md.
 * Consumers do as above.)
 *
 * RX attachment: one ring of daqiri_rx_desc, daemon -> client (or, asked for at attach, of
 * daqiri_rx_desc_compact: the ring's kind says which). The client returns buffers by
 * advancing `consumer` (in order, a whole burst at once is fine). Buffers are read-only to the
 * client: its mappings of RX regions are PROT_READ and the memfds are sealed against writable
 * mappings. When the daemon's flow waits for the client's releases (its ring is full under
 * block backpressure, or the flow's pool is all on loan) it sets DAQIRI_RING_NEED_KICK in
 * `producer_flags` before its poller sleeps; a client that advances `consumer` and then sees
 * the flag writes the attachment's second eventfd, its KICK, as on TX. The client needs no
 * fence for this: a kick lost to the race (its store still in flight as the daemon looks) costs
 * what a client that never kicks pays, a sleep of the poller (at most a millisecond).
 * TX attachment: a ring of daqiri_tx_desc (client -> daemon) and a completion ring of uint32
 * buffer indices (daemon -> client). All TX buffers start with the client; a buffer submitted
 * belongs to the daemon until its index appears in the completion ring. On the TX ring the
 * daemon is the consumer: before its poller sleeps it sets NEED_WAKEUP there, so a client that
 * publishes (seq_cst) and then sees the flag writes the attachment's second eventfd, the KICK
 * (the first one is the daemon's, for completions: a shared one would let either side read
 * the other's signal). A client that never kicks still gets its frames sent, a sleep later
 * (at most a millisecond).
 *
 * GPU RX attachment: a ring in GPU memory (one CUDA VMM allocation the client imports from a
 * POSIX fd) laid out as daqiri_gpu_ring_info says: a uint32 doorbell (the producer index),
 * `size` daqiri_rx_desc, and `size` payload slots of `slot_size` bytes. Slot of counter c is
 * c & (size - 1); its descriptor's `offset` is from the start of the allocation, `region` 0.
 * The daemon's copy engine writes a burst's slots and descriptors, then the doorbell, on one
 * CUDA stream, so a reader that sees the doorbell sees the data. The consumer index is NOT in
 * GPU memory: it is `consumer` of a daqiri_ring_header of kind DAQIRI_RING_GPU in the host
 * "rings" memfd (register that mapping with CUDA to store it from a kernel); `producer` there
 * mirrors the doorbell once the copy is complete, for host threads that sleep on the eventfd
 * with DAQIRI_RING_NEED_WAKEUP like any other ring. The client frees slots by advancing
 * `consumer`; the daemon never writes a slot the consumer index has not released.
 *
 * GPU TX attachment: a TX attachment (rings, eventfd, kick as above) whose buffer i is
 * `slot_size` bytes of GPU memory at payload_offset + i * slot_size of a VMM allocation the
 * client imports as for GPU RX (daqiri_gpu_ring_info: `size` is the buffer count, any number;
 * doorbell_offset and desc_offset are 0). Without header_size the buffer holds the whole frame;
 * with it (header-data split) the attachment has one writable region of `size` host buffers of
 * header_size bytes, buffer i holding bytes [0, min(length, header_size)) of the frame and GPU
 * buffer i the rest. A descriptor's `length` is the whole frame's. Once the GPU writes are
 * complete (synchronise the stream) the client submits as on TX; the daemon copies the frame
 * out of both before it hands the buffer back.
 */
#ifndef DAQIRI_ABI_H
#define DAQIRI_ABI_H

#include <stddef.h>
#include <stdint.h>

#define DAQIRI_ABI_VERSION 6u
#define DAQIRI_RING_MAGIC 0x44515249u /* "IRQD" little-endian: "DQRI" */
#define DAQIRI_MSG_MAGIC 0x4451534du  /* "MSQD" */
#define DAQIRI_CACHE_LINE 64u

/* ---- rings ------------------------------------------------------------------------------- */

enum daqiri_ring_kind {
  DAQIRI_RING_RX = 1,         /* daqiri_rx_desc, daemon -> client */
  DAQIRI_RING_TX = 2,         /* daqiri_tx_desc, client -> daemon */
  DAQIRI_RING_COMPLETION = 3, /* uint32_t buffer index (| COMPLETION_FAILED), daemon -> client */
  DAQIRI_RING_GPU = 4,        /* host control block of a GPU ring: no slots (desc_size 0) */
  DAQIRI_RING_RX_COMPACT = 5, /* daqiri_rx_desc_compact, daemon -> client (AttachRequest.compact) */
};

enum daqiri_ring_state {
  DAQIRI_RING_ACTIVE = 1,
  DAQIRI_RING_DETACHED = 2, /* the daemon stopped serving it (flow deleted, client cut off) */
};

/* consumer_flags bits, written by the consumer only. */
#define DAQIRI_RING_NEED_WAKEUP 0x1u
/* producer_flags bits, written by the producer only. */
#define DAQIRI_RING_NEED_KICK 0x1u /* RX: the daemon waits for releases; kick after one */

struct daqiri_ring_header {
  /* cache line 0: written by the daemon before the ring is shared; read-only afterwards,
   * except `state` (daemon-written, atomic). */
  uint32_t magic;
  uint16_t abi_version;
  uint16_t kind;        /* enum daqiri_ring_kind */
  uint32_t size;        /* slots, a power of two */
  uint32_t desc_size;   /* bytes per slot */
  uint32_t desc_offset; /* from the start of this header to slot 0 */
  uint32_t state;       /* enum daqiri_ring_state */
  uint8_t pad0[DAQIRI_CACHE_LINE - 24];
  /* cache line 1: written by the producer only. */
  uint32_t producer;
  uint8_t pad1[DAQIRI_CACHE_LINE - 4];
  /* cache line 2: written by the consumer only. */
  uint32_t consumer;
  uint8_t pad2[DAQIRI_CACHE_LINE - 4];
  /* cache line 3: the flags, each written by its own side only, and only around that side's
   * sleeps: read often by the other side, written rarely, so the line stays in both caches. */
  uint32_t consumer_flags;
  uint32_t producer_flags;
  uint8_t pad3[DAQIRI_CACHE_LINE - 8];
};

#define DAQIRI_RING_HEADER_SIZE 256u

/* daqiri_rx_desc.flags (all below 0x100: daqiri_rx_desc_compact carries them in a byte) */
#define DAQIRI_DESC_HEADERS_SYNTHESIZED 0x1u /* socket backend: eth/ipv4/udp rebuilt by daqirid */
#define DAQIRI_DESC_TRUNCATED 0x2u           /* the frame did not fit its buffer */
#define DAQIRI_DESC_STREAM 0x4u              /* TCP: `length` bytes of a byte stream, not a frame */
#define DAQIRI_DESC_MESSAGE \
  0x8u /* RDMA: a whole message (SEND, or WRITE with immediate), no headers */
#define DAQIRI_DESC_REMOTE_WRITE 0x10u /* RDMA: written by the peer into the remote window */
/* GPU ring with header-data split: bytes [0, min(length, header_size)) of the frame are in its
 * header slot, the rest at `offset` in the GPU ring (length stays the frame's). */
#define DAQIRI_DESC_SPLIT 0x20u
/* timestamp_ns is the NIC's receive timestamp (hardware_timestamps), in the NIC's clock, not
 * CLOCK_REALTIME. */
#define DAQIRI_DESC_NIC_TIME 0x40u
/* A reorder's batch, not a frame: the buffer holds a daqiri_batch_header, then the batch from
 * payload_offset (DAQIRI_BATCH_HEADER_BYTES) on; `length` counts both, timestamp_ns is its
 * first packet's. */
#define DAQIRI_DESC_BATCH 0x80u

/* daqiri_rx_desc.payload_offset when daqirid did not read the frame: the only flow of its
 * queue takes every frame (a catch-all, or a flow the NIC steers to a queue only its rules
 * reach), so nothing needed reading to steer it. The reader finds the payload with
 * daqiri_rx_payload_offset() below (the client libraries do). GPU rings carry it too, for
 * whole frames: the daemon reads no frame on its way to a GPU, and gpu_ring_payload_offset()
 * (daqiri/gpu_ring.cuh) finds the payload there (with header-data split the daemon finds it in
 * the header it copies). */
#define DAQIRI_PAYLOAD_UNREAD 0xffffu

/* One received frame. The frame starts at `offset` in region `region` of the attachment. */
struct daqiri_rx_desc {
  uint64_t offset;       /* bytes from the start of the region */
  uint64_t timestamp_ns; /* CLOCK_REALTIME when the daemon received it; DAQIRI_DESC_NIC_TIME:
                          * the NIC's receive timestamp, in its clock */
  uint32_t length;       /* frame bytes, Ethernet header included */
  uint32_t flow_id;
  uint16_t region;         /* index in the attachment's region table */
  uint16_t flags;          /* DAQIRI_DESC_* */
  uint16_t payload_offset; /* of the UDP payload within the frame; 0 when not UDP;
                            * DAQIRI_PAYLOAD_UNREAD: not looked for (see there) */
  uint16_t stream; /* STREAM / MESSAGE: which connection of the flow or interface (1, 2, ...) */
};

/* What a reorder's batch says of itself, at the start of its buffer (DAQIRI_DESC_BATCH). The
 * batch follows: packets_per_batch slots of slot_bytes, slot s holding the payload (from the
 * reorder's payload offset on, converted when it names sample types) of the packet whose
 * sequence number is s modulo packets_per_batch; a slot no packet filled reads zero. */
struct daqiri_batch_header {
  uint64_t batch_id;          /* the packets' batch number, or sequence / packets_per_batch */
  uint32_t packets_per_batch; /* slots */
  uint32_t slot_bytes;        /* each slot's: the batch's first packet's payload, converted */
  uint32_t packets;           /* packets placed (a duplicate counts; the later copy stays) */
  uint32_t missing;           /* slots no packet filled */
  uint32_t flags;             /* DAQIRI_BATCH_* */
  uint8_t reserved[36];
};
#define DAQIRI_BATCH_HEADER_BYTES 64u
#define DAQIRI_BATCH_TIMED_OUT 0x1u /* emitted by the reorder's timeout, not complete */

/* One received frame, in half the bytes (AttachRequest.compact: a ring of kind
 * DAQIRI_RING_RX_COMPACT): no receive stamp, no payload offset (find it with
 * daqiri_udp_payload_offset() below) and no connection number, so no TCP or RDMA flow delivers
 * into one. A descriptor is the share of a frame's cost that the daemon's poller pays in the
 * client's cache lines: at 64-byte frames it sets the rate. */
struct daqiri_rx_desc_compact {
  uint32_t offset_lo; /* bytes from the start of the region: offset_lo | offset_hi << 32 */
  uint16_t offset_hi;
  uint8_t region; /* index in the attachment's region table */
  uint8_t flags;  /* DAQIRI_DESC_* */
  uint32_t length;
  uint32_t flow_id;
};

/* One frame to send: `length` bytes from the start of TX buffer `buffer`. On socket and DPDK
 * queues `flags` and `remote` are 0, or, on a queue with accurate_send, name the time before
 * which the frame must not leave (daqiri_tx_desc_set_time below). On RDMA queues `flags` holds the
 * operation (low byte) and the connection (high 16 bits, as RX descriptors name it in `stream`; 0:
 * the first connected), and `remote` the slot of the peer's remote window that WRITE and READ
 * address (WRITE_IMM sends it as the immediate, so the peer knows where the data landed). On
 * TCP queues (tx_policy tcp) the buffer is a message of bytes, `flags` the connection alone (high
 * 16 bits; 0: the first open) and `remote` 0. */
struct daqiri_tx_desc {
  uint32_t buffer; /* index in the TX region */
  uint32_t length; /* frame bytes, Ethernet header included; RDMA: message bytes */
  uint32_t flags;
  uint32_t remote;
};

/* In a completion ring entry: the buffer came back without its work done (the kernel refused
 * the frame; RDMA: no such connection, window or slot, or the work request failed). */
#define DAQIRI_COMPLETION_FAILED 0x80000000u
#define DAQIRI_COMPLETION_BUFFER 0x7fffffffu

/* daqiri_tx_desc.flags on RDMA queues */
enum daqiri_rdma_op {
  DAQIRI_RDMA_SEND = 0,      /* the buffer becomes a message in the peer's receive queue */
  DAQIRI_RDMA_WRITE = 1,     /* into the peer's window slot `remote`; the peer is not told */
  DAQIRI_RDMA_WRITE_IMM = 2, /* the same, and the peer gets a descriptor naming the slot */
  DAQIRI_RDMA_READ = 3       /* the peer's window slot `remote` into the buffer */
};
#define DAQIRI_TX_OP_MASK 0xffu
#define DAQIRI_TX_CONNECTION_SHIFT 16u
#define DAQIRI_TX_RDMA_OPS 4u

/* daqiri_tx_desc.flags on a socket or DPDK queue with accurate_send: the frame leaves no
 * earlier than a CLOCK_REALTIME time in ns (the clock of RX descriptors' timestamp_ns), whose
 * bits 32-55 are flags' bits 8-31 and bits 0-31 `remote`. The daemon takes the time within
 * 2^55 ns (417 days) of its clock that has those 56 bits. Frames leave a queue in ring order:
 * one that waits for its time holds back those submitted after it. */
#define DAQIRI_TX_AT 0x80u
#define DAQIRI_TX_TIME_SHIFT 8u
#define DAQIRI_TX_TIME_BITS 56u

static inline void daqiri_tx_desc_set_time(struct daqiri_tx_desc* d, uint64_t at_ns) {
  d->flags = DAQIRI_TX_AT | (uint32_t)((at_ns >> 32) & 0xffffffu) << DAQIRI_TX_TIME_SHIFT;
  d->remote = (uint32_t)at_ns;
}

/* The time a descriptor with DAQIRI_TX_AT names, as the daemon reads it at `now_ns`. */
static inline uint64_t daqiri_tx_desc_time(const struct daqiri_tx_desc* d, uint64_t now_ns) {
  const uint64_t span = (uint64_t)1 << DAQIRI_TX_TIME_BITS;
  const uint64_t low = (uint64_t)(d->flags >> DAQIRI_TX_TIME_SHIFT) << 32 | d->remote;
  uint64_t t = (now_ns & ~(span - 1)) | low;
  if (t > now_ns && t - now_ns > span / 2 && t >= span) t -= span;
  if (t < now_ns && now_ns - t > span / 2) t += span;
  return t;
}

/* ---- session protocol (SOCK_SEQPACKET, one message per datagram) ---------------------------
 * client: connect -> HELLO        daemon: WELCOME (session id)
 * client: gRPC Attach(session id) -> attachment id + one-time token
 * client: CLAIM(id, token)        daemon: ATTACHED + fds (SCM_RIGHTS), or ERROR
 * client: DETACH(id)              daemon: DETACHED
 * The connection is the session's lifeline: when it closes, or the client process exits,
 * every attachment of the session ends and every buffer it held returns to the daemon. */

enum daqiri_msg_type {
  DAQIRI_MSG_HELLO = 1,
  DAQIRI_MSG_WELCOME = 2,
  DAQIRI_MSG_CLAIM = 3,
  DAQIRI_MSG_ATTACHED = 4,
  DAQIRI_MSG_DETACH = 5,
  DAQIRI_MSG_DETACHED = 6,
  DAQIRI_MSG_ERROR = 7,
};

struct daqiri_msg_header {
  uint32_t magic;   /* DAQIRI_MSG_MAGIC */
  uint16_t version; /* DAQIRI_ABI_VERSION */
  uint16_t type;    /* enum daqiri_msg_type */
  uint32_t length;  /* whole message, header included */
  uint32_t reserved;
};

struct daqiri_msg_hello {
  struct daqiri_msg_header h;
  char name[64]; /* what the client calls itself, NUL-terminated; informational */
};

struct daqiri_msg_welcome {
  struct daqiri_msg_header h;
  uint64_t session_id;
};

#define DAQIRI_TOKEN_BYTES 16u

struct daqiri_msg_claim {
  struct daqiri_msg_header h;
  uint64_t attachment_id;
  uint8_t token[DAQIRI_TOKEN_BYTES];
};

#define DAQIRI_MAX_REGIONS 4u

struct daqiri_region_info {
  uint64_t size;     /* bytes to map */
  uint32_t buf_size; /* bytes per buffer */
  uint32_t num_bufs;
  uint32_t writable; /* 1: TX region, map PROT_READ|PROT_WRITE; 0: map PROT_READ */
  uint32_t reserved;
};

enum daqiri_direction {
  DAQIRI_DIRECTION_RX = 1,
  DAQIRI_DIRECTION_TX = 2,
  DAQIRI_DIRECTION_GPU_RX = 3, /* ATTACHED is a daqiri_msg_attached_gpu */
  /* ATTACHED is a daqiri_msg_attached_gpu without the VMM fd: the ring is the legacy
   * cudaIpcMemHandle_t in the gRPC AttachResponse (AttachRequest.cuda_ipc) */
  DAQIRI_DIRECTION_GPU_RX_IPC = 4,
  /* ATTACHED is a daqiri_msg_attached_gpu: a TX attachment whose frames (or payloads) the
   * client writes into GPU buffers (GPU TX attachment, above) */
  DAQIRI_DIRECTION_GPU_TX = 5,
};

/* Sent with fds, in this order: the rings memfd, the eventfd, then one memfd per region, then
 * for RX, TX and GPU TX the kick eventfd, for GPU RX and GPU TX the GPU memory's VMM POSIX fd. (GPU
 * RX has no regions, or with header-data split one: the header slots, `num_bufs` (= ring slots) of
 * `buf_size` (= header_size) bytes, slot c & (size - 1) holding the first header_size bytes of ring
 * counter c's frame.) */
struct daqiri_msg_attached {
  struct daqiri_msg_header h;
  uint64_t attachment_id;
  uint32_t direction; /* enum daqiri_direction */
  uint32_t region_count;
  uint64_t rings_size;        /* bytes of the rings memfd, mapped PROT_READ|PROT_WRITE */
  uint64_t ring_offset;       /* RX: the RX ring; TX: the TX ring */
  uint64_t completion_offset; /* TX: the completion ring; RX: 0 */
  struct daqiri_region_info regions[DAQIRI_MAX_REGIONS];
};

/* Where things are in a GPU ring (see GPU RX attachment above). */
struct daqiri_gpu_ring_info {
  uint8_t device_uuid[16]; /* the GPU holding the ring: match it against cuDeviceGetUuid */
  uint64_t alloc_size;     /* bytes of the VMM allocation: import and map all of it */
  uint64_t doorbell_offset;
  uint64_t desc_offset;
  uint64_t payload_offset; /* slot i starts at payload_offset + i * slot_size */
  uint32_t size;           /* slots, a power of two */
  uint32_t slot_size;
  uint32_t gpu;         /* the daemon's ordinal of that GPU: informational only */
  uint32_t header_size; /* header-data split: bytes of each frame in the host header slots */
};

struct daqiri_msg_attached_gpu {
  struct daqiri_msg_attached base; /* base.h.length = sizeof(daqiri_msg_attached_gpu) */
  struct daqiri_gpu_ring_info gpu;
};

struct daqiri_msg_detach {
  struct daqiri_msg_header h;
  uint64_t attachment_id;
};

struct daqiri_msg_error {
  struct daqiri_msg_header h;
  int32_t code; /* a gRPC status code */
  uint32_t reserved;
  uint64_t attachment_id;
  char message[256];
};

/* ---- reading frames ---------------------------------------------------------------------- */
#if defined(__CUDACC__)
#define DAQIRI_INLINE static inline __host__ __device__
#else
#define DAQIRI_INLINE static inline
#endif

/* Where the IPv4 header of an Ethernet frame of `length` bytes starts, after up to two VLAN
 * tags (0x8100, 0x88a8), with its version and its own length checked and wholly inside the
 * frame; 0 when the frame carries no such header. */
DAQIRI_INLINE uint32_t daqiri_ipv4_header_offset(const uint8_t* frame, uint32_t length) {
  uint32_t at = 12;
  if (length < at + 2) return 0;
  uint32_t type = (uint32_t)frame[at] << 8 | frame[at + 1];
  for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8); ++tags) {
    at += 4;
    if (length < at + 2) return 0;
    type = (uint32_t)frame[at] << 8 | frame[at + 1];
  }
  at += 2;
  if (type != 0x0800 || length < at + 20 || (frame[at] >> 4) != 4) return 0;
  uint32_t ihl = (uint32_t)(frame[at] & 0x0f) * 4;
  return ihl < 20 || length < at + ihl ? 0 : at;
}

/* Where the UDP payload of an Ethernet frame starts, as daqirid finds it for payload_offset:
 * past the IPv4 header (above), when its protocol is UDP and it is not a later fragment, and
 * 8 bytes of UDP header; 0 when the frame is not that. */
DAQIRI_INLINE uint16_t daqiri_udp_payload_offset(const uint8_t* frame, uint32_t length) {
  uint32_t ip = daqiri_ipv4_header_offset(frame, length);
  if (ip == 0) return 0;
  uint32_t l4 = ip + (uint32_t)(frame[ip] & 0x0f) * 4;
  uint32_t fragment = ((uint32_t)frame[ip + 6] << 8 | frame[ip + 7]) & 0x1fff;
  if (fragment != 0 || frame[ip + 9] != 17 || length < l4 + 8) return 0;
  return (uint16_t)(l4 + 8);
}

/* A descriptor's payload offset: its payload_offset, or when that is DAQIRI_PAYLOAD_UNREAD,
 * what the search above finds in its frame (`d->length` bytes at `frame`). */
DAQIRI_INLINE uint16_t daqiri_rx_payload_offset(const struct daqiri_rx_desc* d,
                                                const uint8_t* frame) {
  return d->payload_offset != DAQIRI_PAYLOAD_UNREAD ? d->payload_offset
                                                    : daqiri_udp_payload_offset(frame, d->length);
}

DAQIRI_INLINE uint64_t daqiri_rx_compact_offset(const struct daqiri_rx_desc_compact* d) {
  return (uint64_t)d->offset_lo | (uint64_t)d->offset_hi << 32;
}

/* ---- layout checks ----------------------------------------------------------------------- */
#ifdef __cplusplus
#define DAQIRI_STATIC_ASSERT static_assert
#else
#define DAQIRI_STATIC_ASSERT _Static_assert
#endif

DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_ring_header) == DAQIRI_RING_HEADER_SIZE, "ring header");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_ring_header, state) == 20, "state");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_ring_header, producer) == 64, "producer line");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_ring_header, producer_flags) == 196, "producer flags");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_ring_header, consumer) == 128, "consumer line");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_ring_header, consumer_flags) == 192, "flags line");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_rx_desc) == 32, "rx desc");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, timestamp_ns) == 8, "rx desc ts");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, length) == 16, "rx desc length");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, flow_id) == 20, "rx desc flow");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, region) == 24, "rx desc region");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, flags) == 26, "rx desc flags");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, payload_offset) == 28, "rx desc payload");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc, stream) == 30, "rx desc stream");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_batch_header) == DAQIRI_BATCH_HEADER_BYTES, "batch");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_batch_header, flags) == 24, "batch flags");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_rx_desc_compact) == 16, "compact rx desc");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc_compact, offset_hi) == 4, "compact offset");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc_compact, region) == 6, "compact region");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc_compact, flags) == 7, "compact flags");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc_compact, length) == 8, "compact length");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_rx_desc_compact, flow_id) == 12, "compact flow");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_tx_desc) == 16, "tx desc");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_tx_desc, length) == 4, "tx desc length");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_header) == 16, "msg header");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_hello) == 80, "hello");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_welcome) == 24, "welcome");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_claim) == 40, "claim");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_region_info) == 24, "region info");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_msg_attached, regions) == 56, "attached regions");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_attached) == 56 + 4 * 24, "attached");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_error) == 288, "error");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_gpu_ring_info) == 64, "gpu ring info");
DAQIRI_STATIC_ASSERT(offsetof(struct daqiri_gpu_ring_info, size) == 48, "gpu ring size");
DAQIRI_STATIC_ASSERT(sizeof(struct daqiri_msg_attached_gpu) == 152 + 64, "attached gpu");

#endif /* DAQIRI_ABI_H */
