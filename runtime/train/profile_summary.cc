#include "train/profile_summary.h"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "ops/kernel_registry.h"
#include "planfile/function_names.h"

namespace dtc {
namespace {

struct Total {
  double us = 0;
  int64_t calls = 0;
};

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return std::string(text) + "\n";
}

// Rows sorted by time, longest first.
std::vector<std::pair<std::string, Total>> byTime(const std::map<std::string, Total>& totals) {
  std::vector<std::pair<std::string, Total>> rows(totals.begin(), totals.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  return rows;
}

std::string summarize(const Executor& ex, uint32_t function, int rows) {
  const plan::Function* f = ex.plan().root().functions()->Get(function);
  // The runs counted: all but the first, when there are others.
  uint32_t lastCall = 0;
  for (const FunctionTiming& t : ex.functionTimings())
    if (t.function == function) lastCall = std::max(lastCall, t.call);
  const uint32_t firstCounted = lastCall > 0 ? 1 : 0;
  double functionUs = 0;
  int64_t runs = 0;
  for (const FunctionTiming& t : ex.functionTimings())
    if (t.function == function && t.call >= firstCounted) functionUs += t.endUs - t.startUs, ++runs;
  if (runs == 0) return "";

  std::map<std::string, Total> byOp, byNode;
  double kernelUs = 0;
  for (const StepTiming& t : ex.timings()) {
    if (t.function != function || t.call < firstCounted || t.step >= f->steps()->size()) continue;
    const plan::Step* step = f->steps()->Get(t.step);
    const double us = t.endUs - t.startUs;
    kernelUs += us;
    Total& op = byOp[kernelName(step->kernel())];
    op.us += us, ++op.calls;
    Total& node = byNode[foldLayerIndices(step->loc() ? step->loc()->str() : "(no node)")];
    node.us += us, ++node.calls;
  }
  const double perRun = functionUs / runs, n = static_cast<double>(runs);
  auto share = [&](double us) { return perRun > 0 ? 100.0 * us / n / perRun : 0.0; };

  std::string out =
      line("profile of %s: %lld run(s) timed%s, %.3f ms each", f->name()->c_str(), (long long)runs,
           firstCounted ? " (the first left out: warm-up)" : "", perRun / 1e3);
  out += line(
      "  in kernels %.3f ms (%.1f%%), outside them %.3f ms (%.1f%%: dispatch, threading, "
      "copies, uploads)",
      kernelUs / n / 1e3, share(kernelUs), (functionUs - kernelUs) / n / 1e3,
      share(functionUs - kernelUs));
  if (!ex.backend().hostMemory())
    out +=
        "  (each kernel waited for on the device: its time is the device's plus one\n"
        "  synchronisation; untimed runs replay the steps without those waits)\n";
  auto header = [&](const char* title) {
    out += line("  %-40s %10s %10s %10s %7s", title, "calls/run", "ms/run", "us/call", "share");
  };
  auto row = [&](const std::string& name, const Total& t) {
    const std::string shown = name.size() > 40 ? "..." + name.substr(name.size() - 37) : name;
    out += line("  %-40s %10.0f %10.3f %10.1f %6.1f%%", shown.c_str(), t.calls / n, t.us / n / 1e3,
                t.us / static_cast<double>(t.calls), share(t.us));
  };
  header("by op type");
  for (const auto& [name, t] : byTime(byOp)) row(name, t);
  const auto nodes = byTime(byNode);
  header("by model node (layers folded)");
  Total rest;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (static_cast<int>(k) < rows) {
      row(nodes[k].first, nodes[k].second);
    } else {
      rest.us += nodes[k].second.us, rest.calls += nodes[k].second.calls;
    }
  }
  if (rest.calls) row("(" + std::to_string(nodes.size() - rows) + " more nodes)", rest);
  return out;
}

}  // namespace

std::string foldLayerIndices(const std::string& node) {
  std::string out;
  size_t begin = 0;
  while (begin <= node.size()) {
    size_t end = node.find('.', begin);
    if (end == std::string::npos) end = node.size();
    const std::string part = node.substr(begin, end - begin);
    const bool number = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    out += number ? "*" : part;
    if (end == node.size()) break;
    out += '.';
    begin = end + 1;
  }
  return out;
}

std::string profileSummary(const Executor& ex, int rows) {
  const plan::Plan& p = ex.plan().root();
  std::set<uint32_t> ran;
  for (const FunctionTiming& t : ex.functionTimings()) ran.insert(t.function);
  for (uint32_t fn : ran)
    if (p.functions()->Get(fn)->name()->str() == fn::kTrainStep) return summarize(ex, fn, rows);
  std::string out;
  for (uint32_t fn : ran) out += summarize(ex, fn, rows);
  return out;
}

}  // namespace dtc
