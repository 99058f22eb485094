#include "planner/ExploreReport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "io/json.h"

namespace dtc::explore_report {

std::string gib(uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b >= double(1ull << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", b / double(1ull << 30));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", b / double(1ull << 20));
  return text;
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds >= 10 ? "%.1f s" : "%.4g ms",
                seconds >= 10 ? seconds : seconds * 1e3);
  return text;
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", s);
  return text;
}

std::string join(const std::vector<std::string>& flags) {
  std::string s;
  for (const std::string& f : flags) s += (s.empty() ? "" : " ") + f;
  return s.empty() ? "(one device)" : s;
}

std::string table(const ExploreResult& r, int top) {
  std::ostringstream os;
  int feasible = 0, built = 0, estimated = 0;
  for (const ExploreCandidate& c : r.candidates) {
    feasible += c.feasible;
    built += c.built;
    estimated += c.built && c.estimated;
  }
  // Screening compiles the contenders whole: the rows it only estimated say so.
  const bool mixed = estimated > 0 && estimated < built;
  os << "dtc explore: " << r.devices << " device(s) on " << r.profile.name << r.profile.basisNote()
     << " (" << r.profile.devicesPerNode << " per node), budget " << gib(r.budget)
     << " per rank: " << r.candidates.size() << " candidates, " << built << " built, " << feasible
     << " feasible (explored in " << seconds(r.seconds) << " on " << r.threads << " thread"
     << (r.threads == 1 ? "" : "s") << ")\n";
  if (r.estimated) os << "candidates " << r.estimateNote << "\n";
  char line[512];
  int meshWidth = 16;  // wider where a mesh has an ep axis
  for (const ExploreCandidate& c : r.candidates)
    if (c.feasible) meshWidth = std::max(meshWidth, static_cast<int>(c.mesh().size()));
  std::snprintf(line, sizeof line, "%4s  %-*s %11s %11s %12s %6s %6s  %s\n", "rank", meshWidth,
                "mesh", "step", "memory", "tokens/s", "MFU", "HFU", "flags");
  os << line;
  int shown = 0;
  for (const ExploreCandidate& c : r.candidates) {
    if (!c.feasible || (top > 0 && shown >= top)) continue;
    ++shown;
    std::snprintf(line, sizeof line, "%4d  %-*s %11s %11s %12.4g %5.1f%% %5.1f%%  ", shown,
                  meshWidth, c.mesh().c_str(), ms(c.prediction.stepSeconds).c_str(),
                  gib(c.memoryPerRank).c_str(), c.prediction.tokensPerSecond(),
                  100 * r.modelUtilisation(c), 100 * c.prediction.utilisation);
    os << line << join(c.flags()) << (c.given ? "  (given)" : "")
       << (c.estimated && mixed ? "  (estimated)" : "") << "\n";
  }
  if (feasible > shown)
    os << "  ... and " << feasible - shown << " more feasible (--top " << top << " shows " << shown
       << ")\n";
  if (shown > 0)
    os << "MFU counts the model's FLOPs (6 per parameter and token, plus attention, as Megatron "
          "and PaLM do); HFU what the layout executes (recomputation, replicated work)\n";
  if (r.best >= 0)
    os << "best: " << join(r.candidates[r.best].flags()) << "\n  " << whyItWon(r) << "\n";
  // The layouts the user asked for, wherever they rank.
  int rank = 0;
  for (const ExploreCandidate& c : r.candidates) {
    rank += c.feasible;
    if (!c.given) continue;
    os << "given: " << c.mesh() << " " << join(c.flags()) << ": ";
    if (c.built && c.prediction.stepSeconds > 0) {
      std::snprintf(line, sizeof line,
                    "%s a step, %s per rank, %.4g tokens/s, MFU %.1f%% (HFU %.1f%%)",
                    ms(c.prediction.stepSeconds).c_str(), gib(c.memoryPerRank).c_str(),
                    c.prediction.tokensPerSecond(), 100 * r.modelUtilisation(c),
                    100 * c.prediction.utilisation);
      os << line;
      if (c.feasible) os << "; rank " << rank << " of " << feasible;
      if (r.best >= 0 && &c != &r.candidates[r.best]) {
        std::snprintf(line, sizeof line, "; %.3gx the pick's step",
                      c.prediction.stepSeconds / r.candidates[r.best].prediction.stepSeconds);
        os << line;
      }
    }
    os << (c.feasible ? "" : (c.built && c.prediction.stepSeconds > 0 ? "; " : "") + c.reason)
       << "\n";
  }
  int infeasible = 0;
  for (const ExploreCandidate& c : r.candidates)
    if (!c.feasible && !c.skipped) ++infeasible;
  if (infeasible) {
    os << "infeasible (" << infeasible << "):\n";
    int listed = 0;
    for (const ExploreCandidate& c : r.candidates)
      if (!c.feasible && !c.skipped && (top <= 0 || listed < top)) {
        ++listed;
        os << "  " << c.mesh() << " " << join(c.flags()) << ": " << c.reason << "\n";
      }
    if (listed < infeasible)
      os << "  ... and " << infeasible - listed << " more (--json lists every candidate)\n";
  }
  return os.str();
}

std::string json(const ExploreResult& r) {
  io::Json j = io::Json::object();
  j.set("devices", r.devices);
  j.set("profile", r.profile.name);
  if (!r.profile.basis.empty()) j.set("profile_basis", r.profile.basis);
  j.set("budget_bytes", r.budget);
  j.set("model_flops_per_step", r.modelFlops);
  io::Json list;
  for (const ExploreCandidate& c : r.candidates) {
    io::Json e = io::Json::object();
    e.set("mesh", c.mesh());
    // `flags`: the whole `dtc compile` command line but -o; `layout_flags`: what this candidate
    // adds to the shared arguments.
    io::Json flags = io::Json(io::Json::Array{}), layout = io::Json(io::Json::Array{});
    for (const std::string& f : r.shared) flags.push(f);
    for (const std::string& f : c.flags()) {
      flags.push(f);
      layout.push(f);
    }
    e.set("flags", flags);
    e.set("layout_flags", layout);
    e.set("built", c.built);
    e.set("feasible", c.feasible);
    e.set("build_s", c.buildSeconds);
    e.set("estimated", c.estimated);
    e.set("given", c.given);
    e.set("reason", c.reason);
    const bool predicted = c.built && c.prediction.stepSeconds > 0;
    e.set("predicted_step_s", predicted ? io::Json(c.prediction.stepSeconds) : io::Json());
    e.set("memory_per_rank_bytes", c.built ? io::Json(c.memoryPerRank) : io::Json());
    e.set("tokens_per_s", predicted ? io::Json(c.prediction.tokensPerSecond()) : io::Json());
    e.set("mfu", predicted ? io::Json(r.modelUtilisation(c)) : io::Json());
    e.set("hfu", predicted ? io::Json(c.prediction.utilisation) : io::Json());
    e.set("flops_per_step", predicted ? io::Json(c.prediction.flopsPerStep) : io::Json());
    if (predicted) {
      e.set("compute_s", c.prediction.computeSeconds);
      e.set("exposed_communication_s", c.prediction.exposedCommunicationSeconds);
      e.set("bubble_s", c.prediction.bubbleSeconds);
    }
    list.push(e);
  }
  j.set("candidates", list);
  j.set("best", r.best >= 0 ? io::Json(r.best) : io::Json());
  j.set("explore_s", r.seconds);
  j.set("threads", r.threads);
  j.set("estimated", r.estimated);
  j.set("how", r.estimateNote);
  return j.dump() + "\n";
}

// A round spacing for about four ticks up to `max`: 1, 2 or 5 times a power of ten.
double roundTick(double max) {
  if (!(max > 0)) return 1;
  const double raw = max / 4, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

std::string tickText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", std::round(v * 1e6) / 1e6);
  return text;
}

// Step time (up) against memory per rank (across) for every candidate that was built: feasible
// ones filled, the others hollow, estimated ones faint; the budget a dashed line, the pick
// circled and named.
std::string svg(const ExploreResult& r) {
  const double width = 720, height = 480, left = 80, right = 20, top = 30, bottom = 60;
  double maxMemory = static_cast<double>(r.budget), maxStep = 0;
  for (const ExploreCandidate& c : r.candidates)
    if (c.built && c.prediction.stepSeconds > 0) {
      maxMemory = std::max(maxMemory, static_cast<double>(c.memoryPerRank));
      maxStep = std::max(maxStep, c.prediction.stepSeconds);
    }
  maxMemory = maxMemory > 0 ? maxMemory * 1.05 : 1;
  maxStep = maxStep > 0 ? maxStep * 1.05 : 1;
  auto x = [&](double bytes) { return left + (width - left - right) * bytes / maxMemory; };
  auto y = [&](double s) { return height - bottom - (height - top - bottom) * s / maxStep; };
  std::ostringstream os;
  os.precision(5);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << left << "\" y=\"18\">dtc explore: " << r.devices << " device(s) on "
     << r.profile.name << "</text>\n"
     << "<line x1=\"" << left << "\" y1=\"" << height - bottom << "\" x2=\"" << width - right
     << "\" y2=\"" << height - bottom << "\" stroke=\"black\"/>\n"
     << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
     << height - bottom << "\" stroke=\"black\"/>\n"
     << "<text x=\"" << (width + left) / 2 << "\" y=\"" << height - 15
     << "\" text-anchor=\"middle\">memory per rank (GiB)</text>\n"
     << "<text x=\"20\" y=\"" << (height - bottom + top) / 2 << "\" transform=\"rotate(-90 20 "
     << (height - bottom + top) / 2 << ")\" text-anchor=\"middle\">predicted step (ms)</text>\n";
  // Ticks at round values (1, 2 or 5 times a power of ten), in GiB across and ms up.
  const double gibUnit = double(1ull << 30);
  const double memoryTick = roundTick(maxMemory / gibUnit), stepTick = roundTick(maxStep * 1e3);
  for (double g = 0; g * gibUnit <= maxMemory; g += memoryTick)
    os << "<line x1=\"" << x(g * gibUnit) << "\" y1=\"" << height - bottom << "\" x2=\""
       << x(g * gibUnit) << "\" y2=\"" << height - bottom + 4 << "\" stroke=\"black\"/>\n<text x=\""
       << x(g * gibUnit) << "\" y=\"" << height - bottom + 16 << "\" text-anchor=\"middle\">"
       << tickText(g) << "</text>\n";
  for (double m = 0; m / 1e3 <= maxStep; m += stepTick)
    os << "<line x1=\"" << left - 4 << "\" y1=\"" << y(m / 1e3) << "\" x2=\"" << left << "\" y2=\""
       << y(m / 1e3) << "\" stroke=\"black\"/>\n<text x=\"" << left - 6 << "\" y=\""
       << y(m / 1e3) + 4 << "\" text-anchor=\"end\">" << tickText(m) << "</text>\n";
  // The legend, top right: what each mark means.
  const double lx = width - right - 190, ly = top + 6;
  os << "<rect x=\"" << lx - 8 << "\" y=\"" << ly - 4 << "\" width=\"196\" height=\"84\" "
     << "fill=\"white\" stroke=\"#bbb\"/>\n"
     << "<circle cx=\"" << lx << "\" cy=\"" << ly + 8 << "\" r=\"4\" fill=\"steelblue\" "
     << "stroke=\"steelblue\"/><text x=\"" << lx + 10 << "\" y=\"" << ly + 12
     << "\">fits the budget</text>\n"
     << "<circle cx=\"" << lx << "\" cy=\"" << ly + 24 << "\" r=\"4\" fill=\"none\" "
     << "stroke=\"steelblue\"/><text x=\"" << lx + 10 << "\" y=\"" << ly + 28
     << "\">does not fit</text>\n"
     << "<circle cx=\"" << lx << "\" cy=\"" << ly + 40 << "\" r=\"4\" fill=\"steelblue\" "
     << "stroke=\"steelblue\" opacity=\"0.5\"/><text x=\"" << lx + 10 << "\" y=\"" << ly + 44
     << "\">estimated, not compiled whole</text>\n"
     << "<line x1=\"" << lx - 5 << "\" y1=\"" << ly + 56 << "\" x2=\"" << lx + 5 << "\" y2=\""
     << ly + 56 << "\" stroke=\"red\" stroke-dasharray=\"3,2\"/><text x=\"" << lx + 10 << "\" y=\""
     << ly + 60 << "\">memory budget per rank</text>\n"
     << "<circle cx=\"" << lx << "\" cy=\"" << ly + 72 << "\" r=\"6\" fill=\"none\" "
     << "stroke=\"red\" stroke-width=\"2\"/><text x=\"" << lx + 10 << "\" y=\"" << ly + 76
     << "\">the pick</text>\n";
  if (r.budget)
    os << "<line x1=\"" << x(double(r.budget)) << "\" y1=\"" << top << "\" x2=\""
       << x(double(r.budget)) << "\" y2=\"" << height - bottom
       << "\" stroke=\"red\" stroke-dasharray=\"6,4\"/>\n<text x=\"" << x(double(r.budget)) - 4
       << "\" y=\"" << top + 12 << "\" text-anchor=\"end\" fill=\"red\">budget</text>\n";
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const ExploreCandidate& c = r.candidates[i];
    if (!c.built || c.prediction.stepSeconds <= 0) continue;
    os << "<circle cx=\"" << x(double(c.memoryPerRank)) << "\" cy=\"" << y(c.prediction.stepSeconds)
       << "\" r=\"4\" fill=\"" << (c.feasible ? "steelblue" : "none") << "\" stroke=\"steelblue\""
       << (c.estimated ? " opacity=\"0.5\"" : "") << "><title>" << c.mesh() << " "
       << join(c.flags()) << (c.estimated ? " (estimated)" : "") << "</title></circle>\n";
  }
  if (r.best >= 0) {
    const ExploreCandidate& w = r.candidates[r.best];
    const double cx = x(double(w.memoryPerRank)), cy = y(w.prediction.stepSeconds);
    os << "<circle cx=\"" << cx << "\" cy=\"" << cy
       << "\" r=\"9\" fill=\"none\" stroke=\"red\" stroke-width=\"2\"/>\n<text x=\"" << cx + 12
       << "\" y=\"" << cy - 8 << "\" fill=\"red\">pick: " << join(w.flags()) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace dtc::explore_report
