/* What the XDP flow filter (flow_filter.bpf.c) and the daemon share: one rule per flow of an
 * interface, in an array map the daemon writes and the program reads, and per-rule counters.
 * C, for the BPF program and the daemon alike. */
#ifndef DAQIRI_XDP_FLOW_FILTER_H
#define DAQIRI_XDP_FLOW_FILTER_H

#include <linux/types.h>

#define DAQIRI_XDP_MAX_RULES 64u
#define DAQIRI_XDP_MAX_QUEUES 64u

/* An IPv4/UDP packet matches when every field does: addresses under their masks (network
 * order; mask 0: any), ports within [lo, hi] (host order; 0..65535: any), the IPv4 total length
 * when not 0. A rule with in_use 0 matches nothing. A match goes to the socket of `queue`, the
 * flow's, when it arrived there: a socket takes frames of its own queue only, so a match that
 * the NIC put on another queue goes on to the kernel (counted in other_queue). */
struct daqiri_xdp_rule {
  __u32 in_use;
  __u32 src_addr;
  __u32 src_mask;
  __u32 dst_addr;
  __u32 dst_mask;
  __u16 src_port_lo;
  __u16 src_port_hi;
  __u16 dst_port_lo;
  __u16 dst_port_hi;
  __u16 ip_length;
  __u16 queue;
};

/* Per rule, per CPU: packets it matched that went to the queue's socket, those that found no
 * socket there, and those that arrived on another queue than the rule's (both went on to the
 * kernel). Index DAQIRI_XDP_MAX_RULES: packets no rule matched (passed to the kernel), in
 * no_socket. */
struct daqiri_xdp_counts {
  __u64 redirected;
  __u64 no_socket;
  __u64 other_queue;
};

#endif
