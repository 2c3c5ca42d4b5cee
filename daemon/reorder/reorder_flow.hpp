// A reorder as its clients see it: a flow whose "frames" are batches. It drains the daemon's
// own RX attachments on its source flows (so fan-out, drops and the buffer ledger are the ones
// every client of those flows gets), places each frame's payload in its batch
// (ReorderBatcher), and delivers each finished batch as one descriptor (DAQIRI_DESC_BATCH) to
// its own clients, one buffer of its pool holding a daqiri_batch_header and the batch after it.
// Its clients attach to it by its name as to any flow, host rings or GPU rings alike. Runs on
// its first source flow's poller; the other sources' pollers wake it through their
// attachments' eventfds.
#pragma once

#include <memory>
#include <vector>

#include "dataplane/rx_attachment.hpp"
#include "dataplane/rx_flow_task.hpp"
#include "reorder/reorder_batcher.hpp"

namespace daqiri::reorder {

class ReorderFlow final : public dataplane::RxFlowTask, private ReorderOutput {
 public:
  // `flow`: its name, interface and id (the pseudo-queue "reorder:NAME"); `sources`: the
  // attachments it drains, which outlive it. Its pool holds `num_bufs` batches of up to
  // `batch_bytes` each, after their header. `burst`: source descriptors taken per poll and
  // source.
  static Result<std::unique_ptr<ReorderFlow>> create(
      const core::Flow& flow, ReorderPlan plan,
      const std::vector<dataplane::RxAttachment*>& sources, uint32_t batch_bytes, uint32_t num_bufs,
      bool huge, uint32_t burst);

  bool poll() override;
  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] std::vector<int> fds() const override;
  [[nodiscard]] memory::BufferPool& pool() override { return pool_; }
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // Its sources wake it (their eventfds); a timer only for its clients' releases.
  [[nodiscard]] bool needs_timed_wakeup() const override { return fanout_.holds_buffers(); }
  // The open batch's timeout.
  [[nodiscard]] uint64_t wakeup_due_ns() const override;
  [[nodiscard]] bool reorders() const override { return true; }

 private:
  struct Source {
    dataplane::RxAttachment* attachment;
    abi::RingView ring;
    uint32_t read = 0;  // next descriptor
  };
  ReorderFlow(const core::Flow& flow, const ReorderPlan& plan, std::vector<Source> sources,
              memory::BufferPool pool, uint32_t burst);
  [[nodiscard]] bool waits_for_releases() const override { return pool_.available() == 0; }
  // Places the next descriptors of `s`; true if there were any.
  bool drain(Source& s, uint64_t now_ns);

  // ReorderOutput: a free buffer of the pool (the batch after its header), and a batch done.
  std::optional<Buffer> acquire() override;
  void emit(const ReorderedBatch& batch) override;

  core::Flow flow_;
  ReorderPlan plan_;
  std::vector<Source> sources_;
  memory::BufferPool pool_;
  dataplane::RxFanout fanout_;
  ReorderBatcher batcher_;
  uint32_t burst_;
  uint64_t stamp_ = 0;        // the frame being placed: its receive stamp
  uint64_t batch_stamp_ = 0;  // the open batch's first frame's
  bool delivered_ = false;    // this poll: publish
};

}  // namespace daqiri::reorder
