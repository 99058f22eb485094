#include "perf/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/transformer_kernels.h"
#include "perf/calibrate_device.h"
#include "support/thread_pool.h"

namespace dtc::perf {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds of one call of `fn`: the median of 5 rounds, each the mean of as many calls as fill
// `budget` seconds (at least 2). The median, not the best: a profile predicts the typical step,
// as runs report their median step, and on a shared machine the best round is a lucky one
// (predictions from best rounds came out low on every candidate).
double timeCall(const std::function<void()>& fn, double budget) {
  fn();  // warm caches and threads
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    int calls = 0;
    const double start = now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = now() - start;
    } while (calls < 2 || elapsed < budget);
    rounds.push_back(elapsed / calls);
  }
  std::nth_element(rounds.begin(), rounds.begin() + 2, rounds.end());
  return rounds[2];
}

// Every rank waits for the others (a tiny all-reduce).
Status barrier(comm::Communicator& comm) {
  float one = 1;
  return comm.allReduceSum(&one, 1);
}

std::string hostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// A hash of a host's name that a float holds exactly (24 bits).
float hostKey(const std::string& name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return static_cast<float>(h & 0xFFFFFF);
}

// Rank 0 and `peer` bounce messages: latency from 8 bytes, bandwidth from 16 MiB; the others
// wait. Returns rank 0's measurement (zeros elsewhere).
StatusOr<Link> measureLink(comm::Communicator& comm, int peer) {
  Link link;
  const int me = comm.rank();
  constexpr int kTag = 7;
  std::vector<uint8_t> buffer(16 << 20);
  auto bounce = [&](int64_t bytes, int rounds) -> StatusOr<double> {
    const double start = now();
    for (int r = 0; r < rounds; ++r) {
      if (me == 0) {
        DTC_RETURN_IF_ERROR(comm.send(buffer.data(), bytes, peer, kTag));
        DTC_RETURN_IF_ERROR(comm.completeSends());
        DTC_RETURN_IF_ERROR(comm.recv(buffer.data(), bytes, peer, kTag));
      } else if (me == peer) {
        DTC_RETURN_IF_ERROR(comm.recv(buffer.data(), bytes, 0, kTag));
        DTC_RETURN_IF_ERROR(comm.send(buffer.data(), bytes, 0, kTag));
        DTC_RETURN_IF_ERROR(comm.completeSends());
      }
    }
    return (now() - start) / (2.0 * rounds);  // one way
  };
  DTC_RETURN_IF_ERROR(barrier(comm));
  if (me == 0 || me == peer) {
    DTC_ASSIGN_OR_RETURN(double small, bounce(8, 200));
    DTC_ASSIGN_OR_RETURN(double large, bounce(static_cast<int64_t>(buffer.size()), 8));
    link.latencySeconds = small;
    link.bytesPerSecond = static_cast<double>(buffer.size()) / std::max(large - small, 1e-9);
  }
  DTC_RETURN_IF_ERROR(barrier(comm));
  return link;
}

// Seconds per element of the kernels whose arithmetic can outweigh their bytes on a CPU, on
// operands of 2^20 elements (rows of 256; attention scores of 64 × 64 per slice).
// Every process measures the same kernel at the same time (a barrier before each), so each
// number carries the contention a job has.
StatusOr<std::vector<std::pair<std::string, double>>> elementCosts(comm::Communicator& comm,
                                                                   ThreadPool& pool) {
  const int64_t n = int64_t{1} << 20, classes = 256, rows = n / classes, t = 64;
  std::vector<float> x(n), dy(n, 0.01f), y(n), dx(n), w(classes, 1.0f), b(classes, 0.0f);
  std::vector<float> stats(2 * rows), dw(classes), db(classes), m(n), v(n);
  std::vector<float> rowMax(rows), sumExp(rows), target(rows);
  // Values spread as activations are, standard normal (the cost of erf and exp depends on them).
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(rng);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = r % classes;
  float loss = 0, one = 1;
  cpu::crossEntropyRowMax(x.data(), rows, classes, rowMax.data(), pool);
  for (int64_t r = 0; r < rows; ++r) sumExp[r] = 1.0f;
  const double budget = 0.05, per = 1.0 / static_cast<double>(n);
  std::vector<std::pair<std::string, std::function<void()>>> kernels = {
      {"gelu", [&] { cpu::gelu(x.data(), y.data(), n, false, pool); }},
      {"gelu_grad", [&] { cpu::geluGrad(dy.data(), x.data(), dx.data(), n, false, pool); }},
      {"gelu_tanh", [&] { cpu::gelu(x.data(), y.data(), n, true, pool); }},
      {"gelu_grad_tanh", [&] { cpu::geluGrad(dy.data(), x.data(), dx.data(), n, true, pool); }},
      {"add",
       [&] {
         cpu::binary(cpu::BinaryOp::kAdd, x.data(), {n}, dy.data(), {n}, y.data(), {n}, pool);
       }},
      {"mul",
       [&] {
         cpu::binary(cpu::BinaryOp::kMul, x.data(), {n}, dy.data(), {n}, y.data(), {n}, pool);
       }},
      {"tanh", [&] { cpu::tanhForward(x.data(), y.data(), n, pool); }},
      {"relu", [&] { cpu::relu(x.data(), y.data(), n, pool); }},
      {"relu_grad", [&] { cpu::reluGrad(dy.data(), x.data(), dx.data(), n, pool); }},
      {"softmax", [&] { cpu::softmax(x.data(), y.data(), rows, classes, 1.0f, pool); }},
      {"softmax_grad",
       [&] { cpu::softmaxGrad(dy.data(), y.data(), dx.data(), rows, classes, 1.0f, pool); }},
      {"causal_softmax",
       [&] { cpu::causalSoftmax(x.data(), y.data(), n / (t * t), t, 1.0f, pool); }},
      {"causal_softmax_grad",
       [&] { cpu::causalSoftmaxGrad(dy.data(), y.data(), dx.data(), n / (t * t), t, 1.0f, pool); }},
      {"softmax_cross_entropy",
       [&] { cpu::softmaxCrossEntropy(x.data(), labels.data(), rows, classes, &loss, pool); }},
      {"softmax_cross_entropy_grad",
       [&] {
         cpu::softmaxCrossEntropyGrad(&one, x.data(), labels.data(), rows, classes, dx.data(),
                                      pool);
       }},
      // The vocabulary-split loss's per-device pieces (row maxima given).
      {"cross_entropy_parts",
       [&] {
         cpu::crossEntropyParts(x.data(), labels.data(), rowMax.data(), rows, classes, 0,
                                sumExp.data(), target.data(), pool);
       }},
      {"cross_entropy_parts_grad",
       [&] {
         cpu::crossEntropyPartsGrad(1.0f, x.data(), labels.data(), rowMax.data(), sumExp.data(),
                                    rows, classes, 0, rows, dx.data(), pool);
       }},
      {"layer_norm",
       [&] {
         cpu::layerNorm(x.data(), w.data(), b.data(), y.data(), stats.data(), stats.data() + rows,
                        rows, classes, 1e-5f, pool);
       }},
      {"layer_norm_grad",
       [&] {
         cpu::layerNormGrad(dy.data(), x.data(), w.data(), stats.data(), stats.data() + rows,
                            dx.data(), dw.data(), db.data(), rows, classes, pool);
       }},
      {"adamw_update",
       [&] {
         cpu::adamw(y.data(), dy.data(), m.data(), v.data(), y.data(), m.data(), v.data(), n, 1.0f,
                    1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, pool);
       }},
  };
  std::vector<std::pair<std::string, double>> costs;
  for (auto& [name, fn] : kernels) {
    DTC_RETURN_IF_ERROR(barrier(comm));
    costs.push_back({name, timeCall(fn, budget) * per});
  }
  return costs;
}

// Every process on one node: the link as the ring all-reduce the model charges sees it — its
// latency term from a tiny all-reduce (2(n−1) steps), its bandwidth from one of 16 MiB
// (2(n−1)/n of the bytes cross each link). This includes what the library spends per call.
StatusOr<Link> measureAllReduceLink(comm::Communicator& comm) {
  const double n = comm.size(), steps = 2 * (n - 1);
  std::vector<float> small(8, 1.0f), large(4 << 20, 1.0f);
  Status status = Status::Ok();
  auto keep = [&](Status s) {
    if (status.ok()) status = std::move(s);
  };
  // A fixed number of calls on every process (a collective's calls must pair up).
  auto timeCollective = [&](const std::function<void()>& fn, int calls) {
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      keep(barrier(comm));
      const double start = now();
      for (int k = 0; k < calls; ++k) fn();
      best = std::min(best, (now() - start) / calls);
    }
    return best;
  };
  const double tiny = timeCollective([&] { keep(comm.allReduceSum(small.data(), 8)); }, 200);
  const double big = timeCollective(
      [&] { keep(comm.allReduceSum(large.data(), static_cast<int64_t>(large.size()))); }, 5);
  // A reduce-scatter and an all-gather of 1 MiB, each charged its ring's (n−1) steps of latency:
  // the library may run them slower per byte than the all-reduce (MPI's reduce-scatter on shared
  // memory does).
  const int64_t block = static_cast<int64_t>(large.size()) / 16 / comm.size();
  std::vector<float> part(block, 1.0f), whole(block * comm.size(), 0.0f);
  const double scatter =
      timeCollective([&] { keep(comm.reduceScatterSum(large.data(), block, part.data())); }, 5);
  const double gather =
      timeCollective([&] { keep(comm.allGather(part.data(), block, whole.data())); }, 5);
  DTC_RETURN_IF_ERROR(status);
  const double bytes = 4.0 * static_cast<double>(large.size());
  Link link{tiny / steps, steps / n * bytes / std::max(big - tiny, 1e-9)};
  const double ringSteps = (n - 1) * link.latencySeconds, sent = (n - 1) / n * bytes / 16;
  link.reduceScatterBytesPerSecond = sent / std::max(scatter - ringSteps, 1e-9);
  link.allGatherBytesPerSecond = sent / std::max(gather - ringSteps, 1e-9);
  return link;
}

// The profile `p` with its links measured: rank 0 with the first rank on its node and the first
// on another (devicesPerNode counted on the way). On a device backend, the links are those its
// collectives take when they go through MPI (host-staged).
StatusOr<DeviceProfile> withLinks(comm::Communicator& comm, const std::string& host,
                                  DeviceProfile p) {
  const int size = comm.size();
  std::vector<float> hosts(size);
  const float mine = hostKey(host);
  DTC_RETURN_IF_ERROR(comm.allGather(&mine, 1, hosts.data()));
  int intraPeer = -1, interPeer = -1, perNode = 0;
  for (int r = 0; r < size; ++r) {
    if (hosts[r] == hosts[0]) ++perNode;
    if (r == 0) continue;
    if (hosts[r] == hosts[0] && intraPeer < 0) intraPeer = r;
    if (hosts[r] != hosts[0] && interPeer < 0) interPeer = r;
  }
  p.devicesPerNode = std::max(perNode, 1);
  if (intraPeer >= 0 && interPeer < 0) {
    DTC_ASSIGN_OR_RETURN(p.intraNode, measureAllReduceLink(comm));
  } else if (intraPeer >= 0) {
    DTC_ASSIGN_OR_RETURN(p.intraNode, measureLink(comm, intraPeer));
  }
  if (interPeer >= 0) {
    DTC_ASSIGN_OR_RETURN(p.interNode, measureLink(comm, interPeer));
  }
  // A link there was no peer to measure keeps the other's numbers, or a memory copy's.
  if (intraPeer < 0 && interPeer < 0) {
    p.intraNode = {p.kernelSeconds, p.memoryBytesPerSecond / 2};
    p.source += "; no other process: links are modelled as memory copies";
  }
  if (intraPeer < 0 && interPeer >= 0) p.intraNode = p.interNode;
  if (interPeer < 0) {
    p.interNode = p.intraNode;
    p.source += "; one node: the link between nodes is the one inside it";
  }
  return p;
}

// The CPU's flash attention (fused attention, which context parallelism always uses), forward
// and backward: per-FLOP curves at head dimension 64 over [1, 4, T, 64], T from 32 to 256, and the
// factor other head dimensions run at on T = 128. FLOPs as the prediction counts them (half of
// the full T² products); each call after a barrier, as every process computes at once.
Status measureAttention(comm::Communicator& comm, ThreadPool& pool, DeviceProfile& p) {
  auto seconds = [&](int64_t t, int64_t d, bool grad) -> StatusOr<double> {
    const int64_t n = 4 * t * d;
    std::vector<float> q(n, 0.01f), k(n, 0.02f), v(n, 0.5f), out(n), dout(n, 0.1f), lse(4 * t),
        dq(n), dk(n), dv(n);
    cpu::causalAttention(q.data(), k.data(), v.data(), out.data(), lse.data(), 4, t, d, 0.125f,
                         pool);
    DTC_RETURN_IF_ERROR(barrier(comm));
    if (!grad)
      return timeCall(
          [&] {
            cpu::causalAttention(q.data(), k.data(), v.data(), out.data(), lse.data(), 4, t, d,
                                 0.125f, pool);
          },
          0.05);
    return timeCall(
        [&] {
          cpu::causalAttentionGrad(dout.data(), q.data(), k.data(), v.data(), out.data(),
                                   lse.data(), dq.data(), dk.data(), dv.data(), 4, t, d, 0.125f,
                                   pool);
        },
        0.05);
  };
  // The curve's points are by FLOPs per slice (step_time.cc's attentionCallFlops), the rate the
  // four slices together reach.
  auto flops = [](int64_t t, int64_t d) { return 2.0 * 4 * static_cast<double>(t * t) * d; };
  std::vector<std::pair<double, double>> forward, backward;
  for (int64_t t : {32, 64, 128, 256}) {
    DTC_ASSIGN_OR_RETURN(const double f, seconds(t, 64, false));
    DTC_ASSIGN_OR_RETURN(const double b, seconds(t, 64, true));
    forward.push_back({flops(t, 64) / 4, flops(t, 64) / f});
    backward.push_back({2 * flops(t, 64) / 4, 2 * flops(t, 64) / b});
  }
  keepNonDecreasing(forward);
  keepNonDecreasing(backward);
  p.attention.push_back({DType::kF32, forward});
  p.attentionGrad.push_back({DType::kF32, backward});
  std::vector<std::pair<double, double>> forwardByDim, backwardByDim;
  for (int64_t d : {16, 32, 64, 128}) {
    DTC_ASSIGN_OR_RETURN(const double f, seconds(128, d, false));
    DTC_ASSIGN_OR_RETURN(const double b, seconds(128, d, true));
    forwardByDim.push_back({static_cast<double>(d), flops(128, d) / f});
    backwardByDim.push_back({static_cast<double>(d), 2 * flops(128, d) / b});
  }
  relativeToHeadDim64(forwardByDim);
  relativeToHeadDim64(backwardByDim);
  p.attentionHeadDim.push_back({DType::kF32, forwardByDim});
  p.attentionGradHeadDim.push_back({DType::kF32, backwardByDim});
  return Status::Ok();
}

}  // namespace

StatusOr<DeviceProfile> calibrate(comm::Communicator& comm, const CalibrateOptions& options) {
  ThreadPool pool(options.threads);
  DeviceProfile p;
  p.name = options.name.empty() ? "calibrated" : options.name;
  p.basis = "measured";
  const std::string host = hostName();
  const std::string processes = std::to_string(comm.size()) + " process(es) computing at once, ";
  if (options.device) {
    std::vector<std::string> skipped;
    DTC_RETURN_IF_ERROR(measureDevice(*options.device, pool, p, skipped));
    p.source = "measured by dtrun --calibrate on " + options.device->name() + " (" + host +
               "): " + processes +
               "each on its device, dtrun's kernels (and cuDNN's, where "
               "the backend runs attention on them)";
    for (const std::string& s : skipped) p.source += "; not measured: " + s;
    p.deviceMemoryBytes = options.device->availableBytes();
    return withLinks(comm, host, p);
  }
  p.device = "cpu";
  p.source = "measured by dtrun --calibrate on " + host + ": " + processes +
             std::to_string(options.threads) + " thread(s) each, the CPU backend's kernels";

  // GEMMs shaped as a linear layer's in a training step: 16n rows (tokens) of width n times an
  // [n, n] weight stored [out, in] (transposed), n from 16 to 512 (32·n³ FLOPs each); the
  // smallest are an attention head's products, which a CPU runs one slice at a time.
  std::vector<std::pair<double, double>> curve;
  for (int64_t n : {16, 32, 64, 128, 256, 512}) {
    const int64_t rows = 16 * n;
    std::vector<float> a(rows * n, 0.5f), b(n * n, 0.25f), c(rows * n);
    DTC_RETURN_IF_ERROR(barrier(comm));
    const double s = timeCall(
        [&] { cpu::matmul(a.data(), b.data(), c.data(), rows, n, n, false, true, pool); }, 0.1);
    const double flops = 2.0 * static_cast<double>(rows * n * n);
    curve.push_back({flops, flops / s});
  }
  keepNonDecreasing(curve);
  p.gemm.push_back({DType::kF32, curve});

  // Memory: a scale over 32 MiB in and out, far beyond the caches.
  {
    const int64_t n = int64_t{8} << 20;
    std::vector<float> x(n, 1.0f), y(n);
    DTC_RETURN_IF_ERROR(barrier(comm));
    const double s = timeCall([&] { cpu::scale(x.data(), y.data(), n, 0.5f, pool); }, 0.2);
    p.memoryBytesPerSecond = 2.0 * 4.0 * static_cast<double>(n) / s;
  }
  // A kernel call's fixed cost: the same on 16 values.
  {
    std::vector<float> x(16, 1.0f), y(16);
    p.kernelSeconds = timeCall([&] { cpu::scale(x.data(), y.data(), 16, 0.5f, pool); }, 0.05);
  }

  DTC_ASSIGN_OR_RETURN(p.elementSeconds, elementCosts(comm, pool));
  DTC_RETURN_IF_ERROR(measureAttention(comm, pool, p));

  DTC_ASSIGN_OR_RETURN(p, withLinks(comm, host, p));
  // Each process's share of this node's memory.
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0)
    p.deviceMemoryBytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize) /
                          static_cast<uint64_t>(p.devicesPerNode);
  return p;
}

}  // namespace dtc::perf
