#include "planner/ExploreLayouts.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "llvm/Support/Error.h"

#include "dist/IR/LayoutText.h"
#include "driver/PipelineOptions.h"
#include "model/ModelFile.h"
#include "source/ModelSource.h"
#include "support/printable.h"

namespace dtc {
namespace {

// The most units (3 a chunk and micro-batch) of a ZB-V candidate explore enumerates.
constexpr int64_t kMostVUnits = int64_t{1} << 15;

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

// The context-parallel splits of `devices` data devices: cp=1 alone, or also every cp up to
// `largest` that divides them, each with all-gather attention (otherAttentionMethods adds the
// others where it fits; the compiler refuses the contexts that do not cut into 2·cp chunks,
// which explore reports).
std::vector<std::pair<int64_t, std::string>> contextSplits(int64_t devices, int64_t largest) {
  std::vector<std::pair<int64_t, std::string>> splits = {{1, ""}};
  for (int64_t cp : divisors(devices))
    if (cp > 1 && cp <= largest) splits.push_back({cp, "all-gather"});
  return splits;
}

}  // namespace

std::string unevenSplit(int64_t batch, int64_t m, int64_t dp) {
  if (batch % m == 0 && (batch / m) % dp == 0) return "";
  std::string reason = "a batch of " + std::to_string(batch) +
                       (m > 1 ? " in " + std::to_string(m) + " micro-batches" : "") +
                       " does not divide over dp=" + std::to_string(dp);
  if (batch % dp != 0) return reason;
  // Each micro-batch splits over dp: the counts dividing the batch a data-parallel rank holds.
  const int64_t samples = batch / dp;
  std::vector<std::string> counts;
  for (int64_t k : divisors(samples)) counts.push_back(std::to_string(k));
  return reason + " (" + std::to_string(samples) + (samples == 1 ? " sample" : " samples") +
         " a data-parallel rank: --microbatches " + alternatives(counts) + ")";
}

int64_t expertsDividing(const CompileRequest& request) {
  if (isOnnxFile(request.model)) return 0;
  llvm::Expected<ModelFile> file = readModelSource(request.model, request.onnx, request.folder);
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  const model::Graph* graph = file->model().graph();
  if (!graph || !graph->nodes() || !graph->initializers()) return 0;
  std::map<std::string, int64_t> rows;
  for (const auto* init : *graph->initializers())
    if (init->info() && init->info()->name() && init->info()->shape() &&
        init->info()->shape()->size() == 2)
      rows[init->info()->name()->str()] = init->info()->shape()->Get(0);
  int64_t experts = 0;
  for (const auto* node : *graph->nodes()) {
    if (!node->op_type() || node->op_type()->str() != "MixtureOfExperts" || !node->inputs() ||
        node->inputs()->size() < 2)
      continue;
    auto it = rows.find(node->inputs()->Get(1)->str());
    if (it != rows.end()) experts = std::gcd(experts, it->second);
  }
  return experts;
}

std::vector<ExploreCandidate> enumerateLayouts(int64_t devices, int64_t batch, bool estimated,
                                               const SplitAxes& axes) {
  std::vector<ExploreCandidate> layouts;
  for (int64_t pp : divisors(devices))
    for (int64_t tp : divisors(devices / pp))
      for (int64_t ep : divisors(devices / (pp * tp)))
        for (const auto& [cp, method] :
             contextSplits(devices / (pp * tp * ep), std::max<int64_t>(axes.perNode / tp, 1))) {
          if (ep > 1 && (axes.experts <= 0 || axes.experts % ep != 0)) continue;
          ExploreCandidate c;
          c.pp = pp;
          c.tp = tp;
          c.ep = ep;
          c.cp = cp;
          c.dp = devices / (pp * tp * ep * cp);
          // Ranks are numbered row-major over the mesh's axes: tp innermost keeps its groups (the
          // most frequent collectives) inside a node, pp outermost puts the stages' point-to-point
          // transfers between nodes — Megatron's order; ep's all-to-alls inside dp's replicas, and
          // cp's ring or all-to-alls between ep and tp (Megatron's cp sits beside tp too).
          std::string mesh;
          for (auto [name, size] :
               {std::pair{"pp", pp}, {"dp", c.dp}, {"ep", ep}, {"cp", cp}, {"tp", tp}})
            if (size > 1)
              mesh += (mesh.empty() ? "" : ",") + std::string(name) + "=" + std::to_string(size);
          c.layout.mesh = mesh;
          c.layout.cpAttention = method;
          std::vector<int64_t> micro = {1};
          if (pp > 1) micro = {pp, 2 * pp, 4 * pp};
          // Estimates are cheap for many micro-batches: down to one sample each (Megatron's
          // largest runs), those that divide.
          for (int64_t m = 8 * pp; estimated && pp > 1 && m * c.dp * ep <= batch; m *= 2)
            if (unevenSplit(batch, m, c.dp * ep).empty()) micro.push_back(m);
          for (int64_t m : micro) {
            // Split over cp, a micro-batch holds as many tokens per rank as over dp alone, whose
            // communication is the same gradient reduction without attention's exchanges: cp
            // is for the micro-batches too small to split over every data device (unless every
            // split is asked for). A batch that does not split is said once, for cp=1.
            if (cp > 1 &&
                (!unevenSplit(batch, m, c.dp * ep).empty() ||
                 (!axes.everyContextSplit && unevenSplit(batch, m, c.dp * cp * ep).empty())))
              continue;
            if (std::string why = unevenSplit(batch, m, c.dp * ep); !why.empty()) {
              ExploreCandidate bad = c;
              if (m > 1) bad.layout.microBatches = m;
              bad.reason = why;
              layouts.push_back(bad);
              continue;
            }
            // A pipeline's: 1F1B, the zero-bubble ZB-H1, and interleaved and ZB-V over two
            // model chunks per device (estimated: and more, while the layers last).
            std::vector<Layout> schedules = {c.layout};
            if (pp > 1) {
              Layout oneF1B = c.layout;
              oneF1B.microBatches = m;
              schedules = {oneF1B};
              Layout zbH1 = oneF1B;
              zbH1.schedule = "zb-h1";
              schedules.push_back(zbH1);
              for (int64_t v = 2; v == 2 || (estimated && pp * v <= axes.chunks); v *= 2)
                for (std::string schedule : {"interleaved", "zb-v"}) {
                  // A V's order is list-scheduled unit by unit; past kMostVUnits units its
                  // micro-batches are so many that interleaving's bubble is small already.
                  if (schedule == "zb-v" && 3 * pp * v * m > kMostVUnits) continue;
                  Layout chunked = oneF1B;
                  chunked.schedule = schedule;
                  chunked.virtualStages = v;
                  schedules.push_back(chunked);
                }
            }
            for (const Layout& schedule : schedules)
              for (int64_t zero : c.dp > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0})
                for (bool sequence :
                     tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
                  ExploreCandidate v = c;
                  v.layout = schedule;
                  if (zero) v.layout.zero = zero;
                  v.layout.sequenceParallel = sequence;
                  layouts.push_back(v);
                }
          }
        }
  return layouts;
}

std::vector<ExploreCandidate> otherAttentionMethods(const ExploreCandidate& c) {
  std::vector<ExploreCandidate> others;
  // Every method the option declares but the one the layout was built with.
  llvm::SmallVector<llvm::StringRef> methods;
  llvm::StringRef(pipelineOptionChoices("cp-attention")->values).split(methods, '|');
  for (llvm::StringRef method : methods) {
    if (method == c.layout.cpAttention) continue;
    ExploreCandidate v = c;
    v.built = v.feasible = v.estimated = v.unpriced = v.skipped = false;
    v.reason.clear();
    v.memoryPerRank = 0;
    v.prediction = {};
    v.buildSeconds = 0;
    v.layout.stageCuts.clear();  // its own cuts from its own prices
    v.layout.cpAttention = method.str();
    others.push_back(std::move(v));
  }
  return others;
}

bool dropsContextSplit(const ExploreCandidate& c) {
  return c.cp > 1 && !c.given && c.reason.find("mesh axis cp splits nothing") != std::string::npos;
}

namespace {

// A whole number of at most nine digits, no sign; nullopt for anything else.
std::optional<int64_t> wholeNumber(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(text);
}

}  // namespace

StatusOr<ExploreCandidate> givenLayout(const std::string& text, int64_t devices, int64_t batch) {
  static const std::set<std::string> valued = {
      "--mesh",      "--zero",       "--microbatches",   "--schedule",
      "--recompute", "--stage-cuts", "--virtual-stages", "--cp-attention"};
  static const std::set<std::string> switches = {"--sequence-parallel", "--vocab-parallel",
                                                 "--no-vocab-parallel", "--no-cp-load-balance"};
  auto bad = [&](const std::string& why) {
    return Status::InvalidInput("dtc explore --try '" + text + "': " + why);
  };
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    const size_t eq = w.find('=');
    if (w.rfind("--", 0) == 0 && eq != std::string::npos && valued.count(w.substr(0, eq))) {
      words.push_back(w.substr(0, eq));
      words.push_back(w.substr(eq + 1));
    } else {
      words.push_back(w);
    }
  }
  ExploreCandidate c;
  c.given = true;
  std::map<std::string, std::string> value;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& f = words[i];
    if (switches.count(f)) {
      if (value.count(f)) return bad(f + " is given twice");
      value[f] = "";
      continue;
    }
    if (!valued.count(f))
      return bad("'" + f + "' is not a layout flag (--mesh, --zero, --microbatches, --schedule, " +
                 "--virtual-stages, --recompute, --stage-cuts, --sequence-parallel, " +
                 "--[no-]vocab-parallel, --cp-attention, --no-cp-load-balance)");
    if (i + 1 == words.size()) return bad(f + " needs a value");
    if (value.count(f)) return bad(f + " is given twice");
    value[f] = words[++i];
  }
  for (const std::string f : {"--zero", "--microbatches", "--virtual-stages"})
    if (value.count(f))
      if (std::optional<int64_t> n = wholeNumber(value[f]); !n || (*n < 1 && f != "--zero"))
        return bad(f + " wants a whole number, got '" + value[f] + "'");
  // The mesh's axes, each at most once, outermost first in the order explore numbers ranks.
  static const std::map<std::string, int> outermostFirst = {
      {"pp", 0}, {"dp", 1}, {"ep", 2}, {"cp", 3}, {"tp", 4}};
  std::map<std::string, int64_t> axis = {{"pp", 1}, {"dp", 1}, {"ep", 1}, {"cp", 1}, {"tp", 1}};
  int previous = -1;
  if (value.count("--mesh")) {
    llvm::Expected<std::vector<dist::MeshAxisText>> parsed = dist::parseMeshText(value["--mesh"]);
    if (!parsed) return bad(llvm::toString(parsed.takeError()));
    for (const dist::MeshAxisText& a : *parsed) {
      if (!axis.count(a.name))
        return bad("mesh axis '" + a.name + "': explore lays out pp, dp, ep, cp and tp");
      if (outermostFirst.at(a.name) <= previous)
        return bad(
            "the mesh's axes go pp, dp, ep, cp, tp from outermost, as explore numbers ranks");
      previous = outermostFirst.at(a.name);
      axis[a.name] = a.size;
    }
  }
  c.pp = axis["pp"];
  c.dp = axis["dp"];
  c.tp = axis["tp"];
  c.ep = axis["ep"];
  c.cp = axis["cp"];
  if (c.pp * c.dp * c.ep * c.cp * c.tp != devices)
    return bad("the mesh has " + std::to_string(c.pp * c.dp * c.ep * c.cp * c.tp) +
               " devices, not " + std::to_string(devices));
  Layout& l = c.layout;
  l.mesh = value.count("--mesh") ? value["--mesh"] : "";
  if (value.count("--microbatches")) l.microBatches = std::stoll(value["--microbatches"]);
  if (value.count("--virtual-stages")) l.virtualStages = std::stoll(value["--virtual-stages"]);
  if (value.count("--zero")) l.zero = std::stoll(value["--zero"]);
  l.schedule = value.count("--schedule") ? value["--schedule"] : "";
  l.recompute = value.count("--recompute") ? value["--recompute"] : "";
  l.stageCuts = value.count("--stage-cuts") ? value["--stage-cuts"] : "";
  if (value.count("--cp-attention")) {
    if (c.cp <= 1) return bad("--cp-attention needs a cp axis in the mesh");
    const OptionChoices* methods = pipelineOptionChoices("cp-attention");
    if (!methods->allows(value["--cp-attention"]))
      return bad("--cp-attention is " + methods->text() + ", got '" + value["--cp-attention"] +
                 "'");
    l.cpAttention = value["--cp-attention"];
  }
  l.sequenceParallel = value.count("--sequence-parallel") > 0;
  l.vocabParallel = value.count("--vocab-parallel") > 0;
  l.wholeVocabulary = value.count("--no-vocab-parallel") > 0;
  l.contiguousSequence = value.count("--no-cp-load-balance") > 0;
  if (l.contiguousSequence && c.cp <= 1)
    return bad("--no-cp-load-balance needs a cp axis in the mesh");
  if (std::string why = unevenSplit(batch, l.microBatchesOrOne(), c.dp * c.ep); !why.empty())
    return bad(why);
  return c;
}

}  // namespace dtc
