#include "support/fault_points.h"

#include <signal.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/runtime_options.h"

namespace dtc {

void faultPoint(const char* point, int rank) {
  static long arrivals = 0;
  const RuntimeOptions& o = runtimeOptions();
  if (o.faultPoint.empty() || o.faultPoint != point || (o.faultRank >= 0 && o.faultRank != rank))
    return;
  if (++arrivals != o.faultWhen) return;
  if (o.faultThrows) throw std::runtime_error(std::string("fault point ") + point);
  if (o.faultPauses) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    return;
  }
  ::raise(SIGKILL);
}

}  // namespace dtc
