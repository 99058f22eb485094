#include "support/fault_points.h"

#include <signal.h>

#include <stdexcept>
#include <string>

#include "support/runtime_options.h"

namespace dtc {

void faultPoint(const char* point, int rank) {
  static long arrivals = 0;
  const RuntimeOptions& o = runtimeOptions();
  if (o.faultPoint.empty() || o.faultPoint != point || (o.faultRank >= 0 && o.faultRank != rank))
    return;
  if (++arrivals != o.faultWhen) return;
  if (o.faultThrows) throw std::runtime_error(std::string("fault point ") + point);
  ::raise(SIGKILL);
}

}  // namespace dtc
