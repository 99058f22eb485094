#include "support/fault_points.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace dtc {
namespace {

struct FaultSpec {
  std::string point;
  int rank = -1;   // any
  long when = 1;   // the how-many-th arrival
  long arrivals = 0;
};

FaultSpec* parseSpec() {
  const char* text = std::getenv("DTC_FAULT");
  if (!text || !*text) return nullptr;
  auto* spec = new FaultSpec;
  std::string s = text;
  if (size_t hash = s.find('#'); hash != std::string::npos) {
    spec->when = std::strtol(s.c_str() + hash + 1, nullptr, 10);
    s.resize(hash);
  }
  if (size_t at = s.find('@'); at != std::string::npos) {
    spec->rank = static_cast<int>(std::strtol(s.c_str() + at + 1, nullptr, 10));
    s.resize(at);
  }
  spec->point = s;
  return spec;
}

}  // namespace

void faultPoint(const char* point, int rank) {
  static FaultSpec* spec = parseSpec();
  if (!spec || spec->point != point || (spec->rank >= 0 && spec->rank != rank)) return;
  if (++spec->arrivals == spec->when) ::raise(SIGKILL);
}

}  // namespace dtc
