// The daemon's flows on one interface: a packet one of them matches goes to the AF_XDP socket of
// the queue it arrived on; every other packet goes on to the kernel untouched (XDP_PASS), so
// ARP, SSH and everything not a flow's keep working. Loaded through libxdp's dispatcher, beside
// other XDP programs on the interface; the daemon changes the rules map live.
// libbpf's helpers need the kernel's types declared first: the order is kept.
// clang-format off
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <xdp/xdp_helpers.h>
// clang-format on

#include "flow_filter.h"

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, DAQIRI_XDP_MAX_RULES);
  __type(key, __u32);
  __type(value, struct daqiri_xdp_rule);
} daqiri_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, DAQIRI_XDP_MAX_QUEUES);
  __type(key, __u32);
  __type(value, __u32);
} daqiri_xsks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, DAQIRI_XDP_MAX_RULES + 1);
  __type(key, __u32);
  __type(value, struct daqiri_xdp_counts);
} daqiri_counts SEC(".maps");

// After other programs (priority 50 is libxdp's default), and on after XDP_PASS only.
struct {
  __uint(priority, 60);
  __uint(XDP_PASS, 1);
} XDP_RUN_CONFIG(daqiri_flow_filter);

struct vlan_tag {
  __be16 tci;
  __be16 type;
};

static __always_inline int pass(__u32 rule) {
  struct daqiri_xdp_counts* c = bpf_map_lookup_elem(&daqiri_counts, &rule);
  if (c) c->no_socket++;  // the pass slot counts unmatched packets in no_socket
  return XDP_PASS;
}

static __always_inline int in_range(__u16 v, __u16 lo, __u16 hi) {
  return v >= lo && v <= hi;
}

SEC("xdp")
int daqiri_flow_filter(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return pass(DAQIRI_XDP_MAX_RULES);
  __be16 type = eth->h_proto;
  void* l3 = eth + 1;
  if (type == bpf_htons(ETH_P_8021Q) || type == bpf_htons(ETH_P_8021AD)) {  // one tag
    struct vlan_tag* tag = l3;
    if ((void*)(tag + 1) > end) return pass(DAQIRI_XDP_MAX_RULES);
    type = tag->type;
    l3 = tag + 1;
  }
  if (type != bpf_htons(ETH_P_IP)) return pass(DAQIRI_XDP_MAX_RULES);
  struct iphdr* ip = l3;
  if ((void*)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_UDP ||
      (ip->frag_off & bpf_htons(0x3fff)) != 0) {  // fragments: the kernel reassembles them
    return pass(DAQIRI_XDP_MAX_RULES);
  }
  struct udphdr* udp = (void*)ip + ip->ihl * 4;
  if ((void*)(udp + 1) > end) return pass(DAQIRI_XDP_MAX_RULES);
  const __u16 sport = bpf_ntohs(udp->source);
  const __u16 dport = bpf_ntohs(udp->dest);
  const __u16 length = bpf_ntohs(ip->tot_len);
  for (__u32 i = 0; i < DAQIRI_XDP_MAX_RULES; i++) {
    // The key on the stack apart from the counter: a slot whose address a helper took is
    // unknown to the verifier after the call, and the loop would look endless.
    __u32 slot = i;
    struct daqiri_xdp_rule* r = bpf_map_lookup_elem(&daqiri_rules, &slot);
    if (!r || !r->in_use) continue;
    if ((ip->saddr & r->src_mask) != r->src_addr || (ip->daddr & r->dst_mask) != r->dst_addr)
      continue;
    if (!in_range(sport, r->src_port_lo, r->src_port_hi) ||
        !in_range(dport, r->dst_port_lo, r->dst_port_hi))
      continue;
    if (r->ip_length != 0 && r->ip_length != length) continue;
    struct daqiri_xdp_counts* c = bpf_map_lookup_elem(&daqiri_counts, &slot);
    if (ctx->rx_queue_index != r->queue) {
      if (c) c->other_queue++;
      return XDP_PASS;
    }
    int action = bpf_redirect_map(&daqiri_xsks, ctx->rx_queue_index, XDP_PASS);
    if (c) {
      if (action == XDP_REDIRECT)
        c->redirected++;
      else
        c->no_socket++;
    }
    return action;
  }
  return pass(DAQIRI_XDP_MAX_RULES);
}

char _license[] SEC("license") = "GPL";
