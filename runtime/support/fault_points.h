// Named places where a test may kill this process with SIGKILL, to show that what the runtime
// writes survives a crash at the worst moment (halfway through a checkpoint file, before its
// index, before `latest` moves). Off unless DTC_FAULT is set:
//   DTC_FAULT=POINT[@RANK][#N]   die at the N-th time (default 1) rank RANK (default any)
//                                reaches POINT.
//   DTC_FAULT=POINT[@RANK][#N]:throw   throw an exception there instead (what dtrun does with
//                                an exception nothing handles).
//   DTC_FAULT=POINT[@RANK][#N]:pause   sleep a second there instead (a thread held back, so
//                                that the others get ahead of it).
// The points are listed in docs/design.md; reaching one costs a string comparison.
#pragma once

namespace dtc {

void faultPoint(const char* point, int rank);

}  // namespace dtc
