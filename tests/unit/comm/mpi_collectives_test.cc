// Every collective of the MPI backend on 4 processes (run by ctest under mpirun). Each rank
// checks its own results; the failure counts are summed so every rank exits with the verdict.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/world.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
    ++failures;
  }
}

void expectOk(const dtc::Status& s, const std::string& what, int rank) {
  expect(s.ok(), what + ": " + s.message(), rank);
}

}  // namespace

int main() {
  auto worldOr = dtc::comm::createMpiWorld();
  if (!worldOr.ok()) {
    std::fprintf(stderr, "%s\n", worldOr.status().message().c_str());
    return 1;
  }
  dtc::comm::Communicator& world = **worldOr;
  const int r = world.rank(), p = world.size();

  auto env = dtc::comm::detectWorld();
  expect(env.ok() && env->rank == r && env->size == p && env->source == "Open MPI",
         "detectWorld agrees with MPI", r);

  const int64_t n = 5;
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(r + i);
  expectOk(world.allReduceSum(data.data(), n), "allReduceSum", r);
  for (int64_t i = 0; i < n; ++i)
    expect(data[i] == static_cast<float>(p * i + p * (p - 1) / 2), "allReduceSum value", r);

  std::vector<float> peaks = {static_cast<float>(r), static_cast<float>(-r)};
  expectOk(world.allReduceMax(peaks.data(), 2), "allReduceMax", r);
  expect(peaks[0] == static_cast<float>(p - 1) && peaks[1] == 0.0f, "allReduceMax value", r);

  std::vector<float> mine = {r * 100.0f, r * 100.0f + 1, r * 100.0f + 2}, all(3 * p);
  expectOk(world.allGather(mine.data(), 3, all.data()), "allGather", r);
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < 3; ++i) expect(all[q * 3 + i] == q * 100.0f + i, "allGather value", r);

  std::vector<float> full(n * p), part(n);
  for (int64_t j = 0; j < n * p; ++j) full[j] = static_cast<float>(r + j);
  expectOk(world.reduceScatterSum(full.data(), n, part.data()), "reduceScatterSum", r);
  for (int64_t i = 0; i < n; ++i)
    expect(part[i] == static_cast<float>(p * (r * n + i) + p * (p - 1) / 2),
           "reduceScatterSum value", r);

  // All-to-all: block j of rank r holds 10r + j; rank r receives 10q + r from every q.
  std::vector<float> blocks(2 * p), got(2 * p);
  for (int j = 0; j < p; ++j) blocks[2 * j] = blocks[2 * j + 1] = 10.0f * r + j;
  expectOk(world.allToAll(blocks.data(), 2, got.data()), "allToAll", r);
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < 2; ++i) expect(got[2 * q + i] == 10.0f * q + r, "allToAll value", r);

  std::vector<float> b(n, static_cast<float>(r));
  expectOk(world.broadcast(b.data(), n, p - 1), "broadcast", r);
  for (float v : b) expect(v == static_cast<float>(p - 1), "broadcast value", r);

  // A ring: even ranks send first, odd ranks receive first, so nothing deadlocks.
  std::vector<float> out(n, static_cast<float>(r)), in(n, -1.0f);
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  if (r % 2 == 0) {
    expectOk(world.send(out.data(), n, next), "send", r);
    expectOk(world.recv(in.data(), n, prev), "recv", r);
  } else {
    expectOk(world.recv(in.data(), n, prev), "recv", r);
    expectOk(world.send(out.data(), n, next), "send", r);
  }
  for (float v : in) expect(v == static_cast<float>(prev), "send/recv value", r);

  // Sub-communicators of even and odd ranks, as a mesh axis would be.
  auto sub = world.split(r % 2, r);
  expectOk(sub.status(), "split", r);
  if (sub.ok()) {
    expect((*sub)->size() == (p + 1 - r % 2) / 2 && (*sub)->rank() == r / 2, "split layout", r);
    float v = static_cast<float>(r);
    expectOk((*sub)->allReduceSum(&v, 1), "sub allReduceSum", r);
    float want = 0;
    for (int q = r % 2; q < p; q += 2) want += q;
    expect(v == want, "sub allReduceSum value", r);
  }

  float total = static_cast<float>(failures);
  (void)world.allReduceSum(&total, 1);
  if (r == 0) std::printf("mpi collectives on %d ranks: %s\n", p, total == 0 ? "ok" : "FAILED");
  return total == 0 ? 0 : 1;
}
