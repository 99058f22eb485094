// The bookkeeping behind running some steps on a second stream (the CUDA backend's collectives
// on its comm stream, overlapping the compute that follows): which of the work still pending
// there a step must wait for before it touches its operands. Pure C++ (no device API), so it is
// unit-tested on any machine; the backend maps tickets to its events.
//
// The rule is by bytes, not by values: a step waits for every pending entry whose byte ranges
// overlap one of its own. That covers a later step reading what the collective writes, writing
// what it still reads, and the arena handing the same bytes to another value. Entries a step
// does not overlap stay pending (the compute stream keeps running beside them) until a later
// step overlaps them or the end of the function drains them all.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "exec/step.h"

namespace dtc {

// Bytes [begin, end) of one memory. Empty ranges overlap nothing.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool empty() const { return end <= begin; }
  bool overlaps(const ByteRange& o) const {
    return !empty() && !o.empty() && begin < o.end && o.begin < end;
  }
};

inline ByteRange byteRange(const void* data, uint64_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(data);
  return {at, at + bytes};
}

// The storage a step's operands occupy (ctx.inputs, then ctx.outputs; empty ones left out).
inline std::vector<ByteRange> operandRanges(const std::vector<TensorView>& inputs,
                                            const std::vector<TensorView>& outputs) {
  std::vector<ByteRange> ranges;
  for (const auto* list : {&inputs, &outputs})
    for (const TensorView& t : *list) {
      const int64_t n = t.numElements();
      const ByteRange r =
          byteRange(t.data, n > 0 ? static_cast<uint64_t>(n) * dtypeSize(t.dtype) : 0);
      if (t.data && !r.empty()) ranges.push_back(r);
    }
  return ranges;
}

// The storage a bound step touches: its operands' and its planned scratch's.
inline std::vector<ByteRange> stepRanges(const StepContext& ctx) {
  std::vector<ByteRange> ranges = operandRanges(ctx.inputs, ctx.outputs);
  if (ctx.scratch && ctx.scratchBytes) ranges.push_back(byteRange(ctx.scratch, ctx.scratchBytes));
  return ranges;
}

class StreamHazards {
 public:
  using Ticket = uint32_t;

  // Work that touches `ranges` is now pending under `ticket` (the caller's handle for waiting on
  // it, an event). A ticket added again while pending is listed twice; waiting on it twice is
  // harmless for events, whose waits refer to their latest record.
  void add(std::vector<ByteRange> ranges, Ticket ticket) {
    std::vector<ByteRange> kept;
    kept.reserve(ranges.size());
    for (const ByteRange& r : ranges)
      if (!r.empty()) kept.push_back(r);
    pending_.push_back({std::move(kept), ticket});
  }

  bool empty() const { return pending_.empty(); }
  size_t size() const { return pending_.size(); }

  // The tickets a step touching `ranges` must wait for, in the order they were added; they are
  // no longer pending (the caller waits for them now).
  std::vector<Ticket> mustWait(const std::vector<ByteRange>& ranges) {
    std::vector<Ticket> wait;
    if (pending_.empty()) return wait;
    size_t kept = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (overlapsAny(pending_[i].ranges, ranges)) {
        wait.push_back(pending_[i].ticket);
      } else {
        if (kept != i) pending_[kept] = std::move(pending_[i]);
        ++kept;
      }
    }
    pending_.resize(kept);
    return wait;
  }

  // Every pending ticket, in the order added; nothing is pending after.
  std::vector<Ticket> drain() {
    std::vector<Ticket> all;
    all.reserve(pending_.size());
    for (const Pending& p : pending_) all.push_back(p.ticket);
    pending_.clear();
    return all;
  }

 private:
  struct Pending {
    std::vector<ByteRange> ranges;
    Ticket ticket = 0;
  };
  // Pending lists hold a few entries and steps a few operands: a quadratic scan is cheaper than
  // keeping anything sorted.
  static bool overlapsAny(const std::vector<ByteRange>& a, const std::vector<ByteRange>& b) {
    for (const ByteRange& x : a)
      for (const ByteRange& y : b)
        if (x.overlaps(y)) return true;
    return false;
  }
  std::vector<Pending> pending_;
};

}  // namespace dtc
