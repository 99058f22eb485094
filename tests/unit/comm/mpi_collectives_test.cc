// Every collective of the MPI backend on 4 processes (run by ctest under mpirun). Each rank
// checks its own results; the failure counts are summed so every rank exits with the verdict.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/world.h"
#include "mpi_check.h"

using dtc::testing::expect;
using dtc::testing::expectOk;
using dtc::testing::verdict;

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

  // A ring: every rank sends before it receives (sends never block).
  std::vector<float> out(n, static_cast<float>(r)), in(n, -1.0f);
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  expectOk(world.send(out.data(), n * sizeof(float), next, 0), "send", r);
  expectOk(world.recv(in.data(), n * sizeof(float), prev, 0), "recv", r);
  expectOk(world.completeSends(), "completeSends", r);
  for (float v : in) expect(v == static_cast<float>(prev), "send/recv value", r);

  // A ring's step as one collective, in both directions; a tagged transfer in flight on the same
  // pair must not be taken by it.
  expectOk(world.send(out.data(), n * sizeof(float), next, 0), "send before shift", r);
  std::vector<float> shifted(n, -1.0f);
  expectOk(world.shift(out.data(), shifted.data(), n * sizeof(float), next, prev), "shift", r);
  for (float v : shifted) expect(v == static_cast<float>(prev), "shift value", r);
  expectOk(world.shift(out.data(), shifted.data(), n * sizeof(float), prev, next), "shift back", r);
  for (float v : shifted) expect(v == static_cast<float>(next), "shift back value", r);
  expectOk(world.recv(in.data(), n * sizeof(float), prev, 0), "recv after shift", r);
  for (float v : in) expect(v == static_cast<float>(prev), "send/recv around a shift", r);
  expectOk(world.completeSends(), "completeSends after shift", r);

  // Pairs (0, 1), (2, 3): ranks 2k and 2k+1 are partners.
  const int partner = r ^ 1;
  if (partner < p) {
    // Two int64 messages received in the opposite order of their tags, small (sent eagerly)
    // and large (MPI's rendezvous: the receiver must not need the sender to block in send).
    for (int64_t count : {int64_t(3), int64_t(1) << 18}) {
      const std::string what = "tags out of order (" + std::to_string(count) + " values)";
      const int64_t bytes = count * static_cast<int64_t>(sizeof(int64_t));
      std::vector<int64_t> one(count), two(count);
      if (r % 2 == 0) {
        for (int64_t i = 0; i < count; ++i) one[i] = (int64_t(1) << 40) + i, two[i] = -i - 7;
        expectOk(world.send(one.data(), bytes, partner, 1), what + ": send 1", r);
        expectOk(world.send(two.data(), bytes, partner, 2), what + ": send 2", r);
        // The payload was copied: changing it now must not change what arrives.
        std::fill(one.begin(), one.end(), 0);
        expectOk(world.completeSends(), what + ": completeSends", r);
      } else {
        expectOk(world.recv(two.data(), bytes, partner, 2), what + ": recv 2", r);
        expectOk(world.recv(one.data(), bytes, partner, 1), what + ": recv 1", r);
        bool same = true;
        for (int64_t i = 0; i < count; ++i)
          same &= one[i] == (int64_t(1) << 40) + i && two[i] == -i - 7;
        expect(same, what + ": values", r);
      }
    }
    // Both partners send 4 MiB to each other first, then receive: blocking sends of that size
    // would wait for each other forever.
    const int64_t count = int64_t(1) << 20;
    std::vector<float> mineBig(count, static_cast<float>(r)), theirs(count, -1.0f);
    expectOk(world.send(mineBig.data(), count * 4, partner, 5), "exchange: send", r);
    expectOk(world.recv(theirs.data(), count * 4, partner, 5), "exchange: recv", r);
    expectOk(world.completeSends(), "exchange: completeSends", r);
    expect(theirs.front() == static_cast<float>(partner) &&
               theirs.back() == static_cast<float>(partner),
           "exchange: values", r);
    // A message larger than the receiver expects is an error, not an overrun.
    float small[2] = {1, 2}, got[1] = {0};
    expectOk(world.send(small, sizeof small, partner, 6), "size mismatch: send", r);
    expect(!world.recv(got, sizeof got, partner, 6).ok(), "size mismatch: recv fails", r);
    expectOk(world.completeSends(), "size mismatch: completeSends", r);
  }

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

  return verdict(world, "mpi collectives on " + std::to_string(p) + " ranks");
}
