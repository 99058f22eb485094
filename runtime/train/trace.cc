#include "train/trace.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "ops/kernel_registry.h"

namespace dtc {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

// An event travels as 8 float32 words (the bits of four doubles).
constexpr int kWords = 8;

}  // namespace

Status writeTrace(const Executor& ex, comm::DeviceMesh& mesh, const std::string& path) {
  const std::vector<StepTiming>& mine = ex.timings();
  comm::Communicator& world = mesh.world();
  const int ranks = world.size();
  // Ranks of different pipeline stages run different steps: pad to the largest count.
  float count = static_cast<float>(mine.size());
  std::vector<float> counts(ranks);
  DTC_RETURN_IF_ERROR(world.allGather(&count, 1, counts.data()));
  const int64_t most = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
  std::vector<float> packed(most * kWords, 0.0f);
  for (size_t i = 0; i < mine.size(); ++i) {
    double fields[4] = {static_cast<double>(mine[i].function), static_cast<double>(mine[i].step),
                        mine[i].startUs, mine[i].endUs};
    std::memcpy(packed.data() + i * kWords, fields, sizeof fields);
  }
  std::vector<float> all(packed.size() * ranks);
  DTC_RETURN_IF_ERROR(
      world.allGather(packed.data(), static_cast<int64_t>(packed.size()), all.data()));
  if (world.rank() != 0) return Status::Ok();

  const plan::Plan& p = ex.plan().root();
  double origin = std::numeric_limits<double>::infinity();
  for (int r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < static_cast<int64_t>(counts[r]); ++i) {
      double fields[4];
      std::memcpy(fields, all.data() + (r * most + i) * kWords, sizeof fields);
      origin = std::min(origin, fields[2]);
    }
  std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  if (!out) return Status::InvalidInput("cannot write trace file " + path);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  for (int r = 0; r < ranks; ++r) {
    // The row's name: the rank and its mesh coordinates.
    std::string label = "rank " + std::to_string(r);
    if (!mesh.names().empty()) {
      int64_t rest = r;
      std::vector<int64_t> coords(mesh.sizes().size());
      for (int a = static_cast<int>(coords.size()) - 1; a >= 0; --a)
        coords[a] = rest % mesh.sizes()[a], rest /= mesh.sizes()[a];
      label += " (";
      for (size_t a = 0; a < coords.size(); ++a)
        label += (a ? ", " : "") + mesh.names()[a] + "=" + std::to_string(coords[a]);
      label += ")";
    }
    out << (first ? "" : ",") << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r
        << ",\"args\":{\"name\":" << quote(label) << "}}";
    first = false;
    for (int64_t i = 0; i < static_cast<int64_t>(counts[r]); ++i) {
      double fields[4];
      std::memcpy(fields, all.data() + (r * most + i) * kWords, sizeof fields);
      auto fn = static_cast<uint32_t>(fields[0]), k = static_cast<uint32_t>(fields[1]);
      if (fn >= p.functions()->size() || k >= p.functions()->Get(fn)->steps()->size()) continue;
      const plan::Function* f = p.functions()->Get(fn);
      const plan::Step* step = f->steps()->Get(k);
      char times[96];
      std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f", fields[2] - origin,
                    fields[3] - fields[2]);
      out << ",{\"name\":" << quote(kernelName(step->kernel()))
          << ",\"cat\":" << quote(f->name()->str()) << ",\"ph\":\"X\",\"pid\":" << r
          << ",\"tid\":0," << times
          << ",\"args\":{\"loc\":" << quote(step->loc() ? step->loc()->str() : "")
          << ",\"step\":" << k << "}}";
    }
  }
  out << "]}\n";
  out.close();
  if (!out) return Status::Internal("cannot write trace file " + tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Internal("cannot rename " + tmp + " to " + path);
  return Status::Ok();
}

}  // namespace dtc
