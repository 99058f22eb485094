// Checks for the tests that run under mpirun (plain programs, not GoogleTest: every rank runs
// its own checks). Each rank counts its failures; verdict() sums them over the job so every
// rank exits with the same answer.
#pragma once

#include <cstdio>
#include <string>

#include "comm/communicator.h"
#include "support/status.h"

namespace dtc::testing {

inline int& mpiFailures() {
  static int failures = 0;
  return failures;
}

inline void expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
    ++mpiFailures();
  }
}

inline void expectOk(const Status& s, const std::string& what, int rank) {
  expect(s.ok(), what + ": " + s.message(), rank);
}

// The exit code for every rank; rank 0 prints "<what>: ok" or "<what>: FAILED".
inline int verdict(comm::Communicator& world, const std::string& what) {
  float total = static_cast<float>(mpiFailures());
  (void)world.allReduceSum(&total, 1);
  if (world.rank() == 0) std::printf("%s: %s\n", what.c_str(), total == 0 ? "ok" : "FAILED");
  return total == 0 ? 0 : 1;
}

}  // namespace dtc::testing
