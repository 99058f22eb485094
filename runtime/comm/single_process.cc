#include <algorithm>
#include <cstdlib>

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
  Status send(const float*, int64_t, int peer) override {
    return Status::Internal("send to rank " + std::to_string(peer) + " in a one-process job");
  }
  Status recv(float*, int64_t, int peer) override {
    return Status::Internal("recv from rank " + std::to_string(peer) + " in a one-process job");
  }
  [[noreturn]] void abortJob(int code) override { std::_Exit(code); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return std::unique_ptr<Communicator>(new SingleProcess());
  }
};

}  // namespace

std::unique_ptr<Communicator> createSingleProcess() { return std::make_unique<SingleProcess>(); }

}  // namespace dtc::comm
