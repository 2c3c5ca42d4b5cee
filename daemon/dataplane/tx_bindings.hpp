// What a TX task keeps per attachment it drains (a binding: the attachment and the task's own
// state for it), as its poller sees them: a Published set the control side changes one member
// at a time, each binding owned here until its poller can no longer see it.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "dataplane/snapshot.hpp"
#include "dataplane/tx_attachment.hpp"

namespace daqiri::dataplane {

template <typename Binding>
class TxBindings {
 public:
  using Set = std::vector<Binding*>;

  TxBindings() : set_(std::make_unique<const Set>()) {}

  // ---- poller side ----
  [[nodiscard]] const Set& load() const { return set_.load(); }

  // ---- control side (callers serialise); `epoch` is the task poller's ----
  void add(const TxAttachment* a, std::unique_ptr<Binding> b, const Epoch& epoch) {
    publish_added(set_, b.get(), epoch);
    owned_[a] = std::move(b);
  }
  // The Grace says when the attachment may go; its binding goes with it.
  Grace remove(const TxAttachment* a, const Epoch& epoch) {
    auto it = owned_.find(a);
    if (it == owned_.end()) return {};
    Grace g = publish_removed(set_, it->second.get(), epoch);
    dispose(g, std::move(it->second));
    owned_.erase(it);
    return g;
  }

 private:
  Published<Set> set_;
  std::map<const TxAttachment*, std::unique_ptr<Binding>> owned_;
};

}  // namespace daqiri::dataplane
