// How `dtc explore` shows what it found: a ranked table, a JSON object, an SVG of predicted
// step time against memory per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/Explore.h"

namespace dtc::explore_report {

std::string gib(uint64_t bytes);  // "1.25 GiB", "12.5 MiB"
std::string ms(double seconds);   // "12.3 ms"
std::string seconds(double s);    // "3.95 s"
std::string join(const std::vector<std::string>& flags);

std::string table(const ExploreResult& r, int top);
std::string json(const ExploreResult& r);
std::string svg(const ExploreResult& r);

}  // namespace dtc::explore_report
