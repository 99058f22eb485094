// The device profiles shipped in profiles/*.json, compiled in (shipped_profiles.cc is generated
// from them when the build is configured).
#pragma once

#include <vector>

namespace dtc::perf {

struct ShippedProfile {
  const char* name;  // the file's name without .json
  const char* text;  // its JSON
};

const std::vector<ShippedProfile>& shippedProfileTexts();

}  // namespace dtc::perf
