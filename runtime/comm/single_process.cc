#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <vector>

#include "comm/communicator.h"

namespace dtc::comm {
namespace {

class SingleProcess : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allReduceSum(float*, int64_t) override { return Status::Ok(); }
  Status allReduceMax(float*, int64_t) override { return Status::Ok(); }
  Status allGather(const float* in, int64_t n, float* out) override {
    if (out != in) std::copy(in, in + n, out);
    return Status::Ok();
  }
  Status reduceScatterSum(const float* in, int64_t n, float* out) override {
    if (out != in) std::copy(in, in + n, out);
    return Status::Ok();
  }
  Status allToAll(const float* in, int64_t n, float* out) override {
    if (out != in) std::copy(in, in + n, out);
    return Status::Ok();
  }
  Status broadcast(float*, int64_t, int root) override {
    return root == 0 ? Status::Ok() : Status::Internal("broadcast root out of range");
  }
  Status shift(const void* in, void* out, int64_t bytes, int to, int from) override {
    if (to != 0 || from != 0 || bytes < 0)
      return Status::Internal("shift to rank " + std::to_string(to) + " from rank " +
                              std::to_string(from) + " in a one-process group");
    if (out != in)
      std::copy(static_cast<const uint8_t*>(in), static_cast<const uint8_t*>(in) + bytes,
                static_cast<uint8_t*>(out));
    return Status::Ok();
  }
  // The only peer is this process: a send is kept until the recv with its tag takes it (the
  // group of a mesh axis of size 1 sends to itself).
  Status send(const void* data, int64_t bytes, int peer, int tag) override {
    if (peer != 0 || tag < 0 || tag > kMaxTag || bytes < 0)
      return Status::Internal("send to rank " + std::to_string(peer) + " (tag " +
                              std::to_string(tag) + ") in a one-process group");
    const uint8_t* from = static_cast<const uint8_t*>(data);
    queued_.emplace(tag, std::vector<uint8_t>(from, from + bytes));
    return Status::Ok();
  }
  Status recv(void* data, int64_t bytes, int peer, int tag) override {
    auto it = queued_.lower_bound(tag);  // the earliest of equal tags (inserted in order)
    if (peer != 0 || it == queued_.end() || it->first != tag)
      return Status::Internal("recv from rank " + std::to_string(peer) + " (tag " +
                              std::to_string(tag) + ") in a one-process group: nothing was sent");
    if (static_cast<int64_t>(it->second.size()) != bytes)
      return Status::Internal("recv of " + std::to_string(bytes) + " bytes (tag " +
                              std::to_string(tag) + "): " + std::to_string(it->second.size()) +
                              " were sent");
    std::copy(it->second.begin(), it->second.end(), static_cast<uint8_t*>(data));
    queued_.erase(it);
    return Status::Ok();
  }
  // Nothing is in flight: a message waits in `queued_` for its recv.
  Status completeSends() override { return Status::Ok(); }
  [[noreturn]] void abortJob(int code) override { std::_Exit(code); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return std::unique_ptr<Communicator>(new SingleProcess());
  }

 private:
  std::multimap<int, std::vector<uint8_t>> queued_;  // by tag
};

}  // namespace

std::unique_ptr<Communicator> createSingleProcess() { return std::make_unique<SingleProcess>(); }

}  // namespace dtc::comm
