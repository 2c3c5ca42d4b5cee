// Every counter GetStats reports for a flow and for an attachment, declared once. GetStats, the
// Prometheus families and `daqiri-ctl stats` are all written from these tables. A row:
//   X(member, field, column, family, reason, applies)
// member: the daemon's snapshot (orchestrator::FlowStats, AttachmentStats); field: the message
// field in control.proto ("": not sent); column: its heading in `daqiri-ctl stats` ("": not
// shown); family: the Prometheus family ("": not exported; help and type in k*Families) and
// reason: its `reason` label ("": none); applies: which attachments have it (RX, TX, GPU rings,
// or all), or which flows (all, or reorders only). Adding a counter: a row here, its field in
// control.proto, its line in docs/metrics.md; then count it where it happens.
#pragma once

#include <cstdint>
#include <string_view>

namespace daqiri::v1::stats {

enum class Applies : uint8_t { kAll, kRx, kTx, kGpu, kReorder };
enum class Kind : uint8_t { kCounter, kGauge };

// clang-format off
#define DAQIRI_FLOW_COUNTERS(X)                                                                    \
  X(packets,         "packets",               "PACKETS",      "daqiri_flow_packets_total",         "",           kAll) \
  X(bytes,           "bytes",                 "BYTES",        "daqiri_flow_bytes_total",           "",           kAll) \
  X(no_attachment,   "dropped_no_attachment", "NO_CLIENT",    "daqiri_flow_dropped_packets_total", "no_client",  kAll) \
  X(rings_full,      "dropped_rings_full",    "RINGS_FULL",   "daqiri_flow_dropped_packets_total", "rings_full", kAll) \
  X(filtered,        "dropped_filtered",      "FILTERED",     "daqiri_flow_dropped_packets_total", "filtered",   kAll) \
  X(truncated,       "truncated",             "TRUNCATED",    "daqiri_flow_truncated_packets_total", "",         kAll) \
  X(kernel_drops,    "kernel_drops",          "KERNEL_DROPS", "",                                  "",           kAll) \
  X(no_buffer,       "dropped_no_buffer",     "NO_BUFFER",    "daqiri_flow_dropped_packets_total", "no_buffer",  kAll) \
  X(overflow,        "",                      "",             "daqiri_flow_dropped_packets_total", "kernel",     kAll) \
  X(attachments,     "attachments",           "CLIENTS",      "daqiri_flow_attachments",           "",           kAll) \
  X(buffers_on_loan, "buffers_on_loan",       "ON_LOAN",      "daqiri_flow_buffers_on_loan",       "",           kAll) \
  X(buffers_total,   "buffers_total",         "",             "daqiri_flow_buffers",               "",           kAll) \
  X(connections,     "connections",           "",             "daqiri_flow_connections",           "",           kAll) \
  X(late,            "dropped_late",          "",             "daqiri_flow_dropped_packets_total", "late",       kReorder) \
  X(duplicates,      "dropped_duplicate",     "",             "daqiri_flow_dropped_packets_total", "duplicate",  kReorder) \
  X(short_frames,    "dropped_short",         "",             "daqiri_flow_dropped_packets_total", "short",      kReorder) \
  X(not_samples,     "dropped_not_samples",   "",             "daqiri_flow_dropped_packets_total", "not_samples", kReorder) \
  X(timed_out,       "batches_timed_out",     "",             "daqiri_reorder_batches_timed_out_total", "",      kReorder)

#define DAQIRI_ATTACHMENT_COUNTERS(X)                                                              \
  X(packets,            "packets",            "PACKETS",    "daqiri_attachment_packets_total",         "",               kAll) \
  X(bytes,              "bytes",              "BYTES",      "daqiri_attachment_bytes_total",           "",               kAll) \
  X(dropped_ring_full,  "dropped_ring_full",  "RING_FULL",  "daqiri_attachment_dropped_packets_total", "ring_full",      kAll) \
  X(dropped_over_share, "dropped_over_share", "OVER_SHARE", "daqiri_attachment_dropped_packets_total", "over_share",     kRx)  \
  X(dropped_no_buffer,  "dropped_no_buffer",  "NO_BUFFER",  "daqiri_attachment_dropped_packets_total", "no_buffer",      kRx)  \
  X(bad_index,          "bad_index",          "BAD_INDEX",  "daqiri_attachment_dropped_packets_total", "bad_index",      kAll) \
  X(bad_descriptor,     "bad_descriptor",     "BAD_DESC",   "daqiri_attachment_dropped_packets_total", "bad_descriptor", kAll) \
  X(send_errors,        "send_errors",        "SEND_ERR",   "daqiri_attachment_dropped_packets_total", "send_error",     kAll) \
  X(refused,            "refused",            "REFUSED",    "daqiri_attachment_dropped_packets_total", "refused",        kTx)  \
  X(stalls,             "stalls",             "STALLS",     "daqiri_attachment_backpressure_stalls_total", "",         kRx)  \
  X(kicks,              "kicks",              "KICKS",      "daqiri_attachment_kicks_total",           "",               kAll) \
  X(on_loan,            "buffers_on_loan",    "ON_LOAN",    "daqiri_attachment_buffers_on_loan",       "",               kAll) \
  X(share,              "share",              "",           "",                                        "",               kRx)  \
  X(ring_used,          "ring_used",          "",           "daqiri_attachment_ring_used_slots",       "",               kAll) \
  X(ring_size,          "ring_size",          "",           "daqiri_attachment_ring_slots",            "",               kAll) \
  X(gpu_packets,        "gpu_packets",        "IN_GPU",     "daqiri_gpu_copied_packets_total",         "",               kGpu) \
  X(gpu_bytes,          "gpu_bytes",          "",           "daqiri_gpu_copied_bytes_total",           "",               kGpu)
// clang-format on

struct Counter {
  std::string_view field;
  std::string_view column;
  std::string_view family;
  std::string_view reason;
  Applies applies;
};

#define DAQIRI_STATS_ROW(member, field, column, family, reason, applies) \
  Counter{field, column, family, reason, Applies::applies},
inline constexpr Counter kFlowCounters[] = {DAQIRI_FLOW_COUNTERS(DAQIRI_STATS_ROW)};
inline constexpr Counter kAttachmentCounters[] = {DAQIRI_ATTACHMENT_COUNTERS(DAQIRI_STATS_ROW)};
#undef DAQIRI_STATS_ROW

struct Family {
  std::string_view name;
  Kind kind;
  std::string_view help;
};

inline constexpr Family kFlowFamilies[] = {
    {"daqiri_flow_packets_total", Kind::kCounter,
     "Packets (TCP: stream chunks) received on a flow"},
    {"daqiri_flow_bytes_total", Kind::kCounter, "Bytes received on a flow"},
    {"daqiri_flow_dropped_packets_total", Kind::kCounter,
     "Packets of a flow no client received, by reason"},
    {"daqiri_flow_truncated_packets_total", Kind::kCounter,
     "Packets larger than a buffer, delivered cut short"},
    {"daqiri_flow_buffers_on_loan", Kind::kGauge, "Buffers of the flow's pool held by clients"},
    {"daqiri_flow_buffers", Kind::kGauge, "Buffers in the flow's pool"},
    {"daqiri_flow_attachments", Kind::kGauge, "Clients attached to the flow"},
    {"daqiri_flow_connections", Kind::kGauge, "TCP connections of the flow open now"},
    {"daqiri_reorder_batches_timed_out_total", Kind::kCounter,
     "A reorder's batches emitted on their timeout, not whole"},
};

inline constexpr Family kAttachmentFamilies[] = {
    {"daqiri_attachment_packets_total", Kind::kCounter,
     "Packets delivered to (RX) or sent for (TX) an attachment"},
    {"daqiri_attachment_bytes_total", Kind::kCounter, "Bytes of those packets"},
    {"daqiri_attachment_dropped_packets_total", Kind::kCounter,
     "Packets an attachment lost, by reason"},
    {"daqiri_attachment_buffers_on_loan", Kind::kGauge,
     "Buffers the attachment's client holds now"},
    {"daqiri_gpu_copied_packets_total", Kind::kCounter,
     "Packets the copy engine placed in a GPU ring"},
    {"daqiri_gpu_copied_bytes_total", Kind::kCounter, "Bytes of those packets"},
    {"daqiri_attachment_backpressure_stalls_total", Kind::kCounter,
     "Times the attachment's full ring held its flow back (block backpressure: the slow "
     "consumer)"},
    {"daqiri_attachment_kicks_total", Kind::kCounter,
     "Times the attachment's client woke its sleeping poller (the kick eventfd: TX after a "
     "submit, RX after a release the flow waited for)"},
    {"daqiri_attachment_ring_used_slots", Kind::kGauge,
     "Slots of the client's ring in use: RX not yet released, TX submitted and not yet taken"},
    {"daqiri_attachment_ring_slots", Kind::kGauge, "Slots in the client's ring"},
};

// Whether an attachment (RX or TX, into a GPU ring or not) or a flow (a reorder or not) has a
// counter.
constexpr bool applies_to(Applies applies, bool rx, bool gpu, bool reorder = false) {
  switch (applies) {
    case Applies::kAll:
      return true;
    case Applies::kRx:
      return rx;
    case Applies::kTx:
      return !rx;
    case Applies::kGpu:
      return gpu;
    case Applies::kReorder:
      return reorder;
  }
  return false;
}

}  // namespace daqiri::v1::stats
