#include "planner/Explore.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "llvm/Support/raw_ostream.h"

#include "flatbuffers/ModelFile.h"
#include "io/files.h"
#include "onnx/ModelSource.h"
#include "plan/plan.h"
#include "planner/CompileRequest.h"
#include "planner/ExploreEstimate.h"
#include "planner/ExploreReport.h"
#include "planner/MemoryFit.h"

namespace dtc {
namespace {

// The most layer micro-batches (layers x micro-batches) explore's automatic mode compiles whole
// in one candidate; beyond it, candidates are estimated from shallow copies.
constexpr int64_t kLargestWholeCompile = 2048;
// The most layer micro-batches, summed over the candidates, that the automatic mode compiles
// whole (about ten seconds of compiling on one core of a laptop-class machine); beyond it,
// estimates screen the candidates and the contenders are compiled whole.
constexpr int64_t kLargestWholeExploration = 4096;
// How much slower than the fastest an estimate may put a candidate that screening still
// compiles whole: beyond the estimate's largest error against whole compiles (under 20% on
// the 8-layer GPT of bench/explore_estimate_check.py and tests/lit/explore_estimate.test).
constexpr double kContenderMargin = 0.25;

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

// The flags explore chooses for each candidate: given by the user, they would fix the layout.
const std::set<std::string>& chosenFlags() {
  static const std::set<std::string> flags = {"--mesh",
                                              "--zero",
                                              "--microbatches",
                                              "--schedule",
                                              "--virtual-stages",
                                              "--recompute",
                                              "--sequence-parallel",
                                              "--accumulate",
                                              "--stage-cuts",
                                              "--vocab-parallel",
                                              "--no-vocab-parallel",
                                              "--output",
                                              "-o",
                                              "--memory",
                                              "--schedule-trace",
                                              "--dump-ir"};
  return flags;
}

// Compiles `c` and predicts it; a compile error is the reason it is infeasible.
void compileAndPredict(const std::vector<std::string>& base, ExploreCandidate& c,
                       const perf::DeviceProfile& profile, uint64_t budget) {
  c.built = true;
  for (;;) {
    std::vector<std::string> args = base;
    const std::vector<std::string> flags = c.flags();
    args.insert(args.end(), flags.begin(), flags.end());
    StatusOr<CompileRequest> request = parseCompileArgs(args);
    if (!request.ok()) {
      c.reason = request.status().message();
      return;
    }
    request->options.trial = true;  // quiet: no schedule report, no trace
    request->threaded = false;      // candidates compile side by side instead
    StatusOr<std::vector<uint8_t>> bytes = compilePlan(*request);
    if (!bytes.ok()) {
      if (c.keepVocabularyWhole(bytes.status())) continue;
      c.reason = bytes.status().message();
      return;
    }
    StatusOr<Plan> plan = Plan::fromFileBytes(std::move(*bytes), "candidate");
    if (!plan.ok()) {
      c.reason = plan.status().message();
      return;
    }
    for (uint64_t b : rankBytesByStage(*plan)) c.memoryPerRank = std::max(c.memoryPerRank, b);
    StatusOr<perf::StepPrediction> predicted = perf::predictStep(*plan, profile);
    if (!predicted.ok()) {
      c.reason = predicted.status().message();
      return;
    }
    c.prediction = *predicted;
    c.feasible = !budget || c.memoryPerRank <= budget;
    if (!c.feasible)
      c.reason = "needs " + explore_report::gib(c.memoryPerRank) + " per rank, over the " +
                 explore_report::gib(budget) + " budget";
    return;
  }
}

void build(const std::vector<std::string>& base, ExploreCandidate& c,
           const perf::DeviceProfile& profile, uint64_t budget, LayerEstimator* estimator) {
  const auto start = std::chrono::steady_clock::now();
  if (estimator)
    estimator->estimate(c, budget);
  else
    compileAndPredict(base, c, profile, budget);
  c.buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Builds `jobs` on as many threads as the machine has cores (each compile has its own context);
// returns how many ran.
size_t buildAll(const std::vector<std::string>& base, std::vector<ExploreCandidate*> jobs,
                const perf::DeviceProfile& profile, uint64_t budget, LayerEstimator* estimator) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < jobs.size();) build(base, *jobs[k], profile, budget, estimator);
  };
  const size_t threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), jobs.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return threads;
}

// Whether `a`, compiled whole, beats `b`: it fits where `b` does not, or both fit and it is faster.
bool beats(const ExploreCandidate& a, const ExploreCandidate& b) {
  if (a.feasible != b.feasible) return a.feasible;
  return a.feasible && a.prediction.stepSeconds < b.prediction.stepSeconds;
}

// Screening: compiles whole the estimated candidates that could be the pick (an estimate within
// kContenderMargin of the fastest feasible candidate's step, and of the budget), and those the
// estimate could not price, until no more qualify (a contender that fails whole raises the
// fastest). The rest keep their estimates. A pipeline is compiled twice, with the stage cuts the
// estimate chose from the device profile's prices and with the compiler's own (a profile-free
// roofline), and keeps the faster: each was measured ahead of the other by up to 44% and 7.6%.
// Returns how many candidates it compiled.
size_t compileContenders(const std::vector<std::string>& base,
                         std::vector<ExploreCandidate>& candidates,
                         const perf::DeviceProfile& profile, uint64_t budget) {
  size_t compiled = 0;
  for (;;) {
    double fastest = std::numeric_limits<double>::infinity();
    for (const ExploreCandidate& c : candidates)
      if (c.feasible) fastest = std::min(fastest, c.prediction.stepSeconds);
    std::vector<ExploreCandidate*> jobs;
    std::vector<double> estimateSeconds;
    std::deque<ExploreCandidate> ownCuts;  // twins with the compiler's cuts, by pointer in jobs
    std::vector<std::pair<ExploreCandidate*, ExploreCandidate*>> twins;
    for (ExploreCandidate& c : candidates) {
      if (!c.estimated || !c.built) continue;
      const bool priced = c.prediction.stepSeconds > 0;
      const bool contender =
          c.unpriced ||
          (priced && c.prediction.stepSeconds <= (1 + kContenderMargin) * fastest &&
           (!budget || double(c.memoryPerRank) <= (1 + kContenderMargin) * double(budget)));
      if (!contender) continue;
      c.estimated = c.unpriced = c.feasible = false;
      c.reason.clear();
      c.memoryPerRank = 0;
      c.prediction = {};
      jobs.push_back(&c);
      estimateSeconds.push_back(c.buildSeconds);
      if (!c.layout.stageCuts.empty()) {
        ownCuts.push_back(c);
        ownCuts.back().layout.stageCuts.clear();
        twins.push_back({&c, &ownCuts.back()});
      }
    }
    if (jobs.empty()) return compiled;
    const size_t candidatesCompiled = jobs.size();
    for (auto& [estimateCuts, own] : twins) jobs.push_back(own);
    buildAll(base, jobs, profile, budget, nullptr);
    for (size_t k = 0; k < estimateSeconds.size(); ++k) jobs[k]->buildSeconds += estimateSeconds[k];
    for (auto& [estimateCuts, own] : twins) {
      own->buildSeconds += estimateCuts->buildSeconds;
      if (beats(*own, *estimateCuts))
        *estimateCuts = std::move(*own);
      else
        estimateCuts->buildSeconds = own->buildSeconds;
    }
    compiled += candidatesCompiled;
  }
}

// Why a batch of `batch` samples in `m` micro-batches does not split evenly over `dp` ranks;
// empty where it does.
std::string unevenSplit(int64_t batch, int64_t m, int64_t dp) {
  if (batch % m == 0 && (batch / m) % dp == 0) return "";
  return "a batch of " + std::to_string(batch) +
         (m > 1 ? " in " + std::to_string(m) + " micro-batches" : "") +
         " does not divide over dp=" + std::to_string(dp);
}

// The greatest common divisor of the expert counts of the model's mixture-of-experts layers (its
// routers' rows), 0 for a model without one or that is not in dtc's format.
int64_t expertsDividing(const CompileRequest& request) {
  if (isOnnxFile(request.model)) return 0;
  llvm::Expected<ModelFile> file = ModelFile::read(request.model);
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

// The layouts of `devices` devices, and for each the settings that change its speed.
// `manyMicroBatches`: beyond P, 2P and 4P micro-batches, every doubling that divides the batch.
// `experts`: what every mixture-of-experts layer's expert count divides into (their greatest
// common divisor), 0 for a model without one: the data devices then also split over ep, each
// ep that divides it. Context parallelism is priced only where --try gives it: its attention on
// blocks of the sequence is not yet priced within the bound the others are (on the CPU its
// kernel's rate falls with the head dimension, which the profile's curves do not see).
std::vector<ExploreCandidate> enumerateLayouts(int64_t devices, int64_t batch,
                                               bool manyMicroBatches, int64_t experts) {
  std::vector<ExploreCandidate> layouts;
  for (int64_t pp : divisors(devices))
    for (int64_t tp : divisors(devices / pp))
      for (int64_t ep : divisors(devices / (pp * tp))) {
        if (ep > 1 && (experts <= 0 || experts % ep != 0)) continue;
        ExploreCandidate c;
        c.pp = pp;
        c.tp = tp;
        c.ep = ep;
        c.dp = devices / (pp * tp * ep);
        // Ranks are numbered row-major over the mesh's axes: tp innermost keeps its groups (the
        // most frequent collectives) inside a node, pp outermost puts the stages' point-to-point
        // transfers between nodes — Megatron's order; ep's all-to-alls inside dp's replicas.
        std::string mesh;
        for (auto [name, size] : {std::pair{"pp", pp}, {"dp", c.dp}, {"ep", ep}, {"tp", tp}})
          if (size > 1)
            mesh += (mesh.empty() ? "" : ",") + std::string(name) + "=" + std::to_string(size);
        c.layout.mesh = mesh;
        std::vector<int64_t> micro = {1};
        if (pp > 1) micro = {pp, 2 * pp, 4 * pp};
        // Estimates are cheap for many micro-batches: down to one sample each (Megatron's
        // largest runs), those that divide.
        for (int64_t m = 8 * pp; manyMicroBatches && pp > 1 && m * c.dp * ep <= batch; m *= 2)
          if (unevenSplit(batch, m, c.dp * ep).empty()) micro.push_back(m);
        for (int64_t m : micro) {
          if (std::string why = unevenSplit(batch, m, c.dp * ep); !why.empty()) {
            ExploreCandidate bad = c;
            if (m > 1) bad.layout.microBatches = m;
            bad.reason = why;
            layouts.push_back(bad);
            continue;
          }
          // A pipeline's: 1F1B, and interleaved over two model chunks per device.
          std::vector<Layout> schedules = {c.layout};
          if (pp > 1) {
            Layout oneF1B = c.layout, interleaved = c.layout;
            oneF1B.microBatches = interleaved.microBatches = m;
            interleaved.schedule = "interleaved";
            interleaved.virtualStages = 2;
            schedules = {oneF1B, interleaved};
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

// A whole number of at most nine digits, no sign; nullopt for anything else.
std::optional<int64_t> wholeNumber(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(text);
}

// A layout the user gives with --try: the `dtc compile` flags that lay it out (explore's own
// choices, nothing else), checked so that a mistake is an error rather than a candidate.
StatusOr<ExploreCandidate> givenLayout(const std::string& text, int64_t devices, int64_t batch) {
  static const std::set<std::string> valued = {
      "--mesh",      "--zero",       "--microbatches",   "--schedule",
      "--recompute", "--stage-cuts", "--virtual-stages", "--cp-attention"};
  static const std::set<std::string> switches = {"--sequence-parallel", "--vocab-parallel",
                                                 "--no-vocab-parallel"};
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
                 "--[no-]vocab-parallel, --cp-attention)");
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
  for (std::istringstream mesh(value.count("--mesh") ? value["--mesh"] : ""); mesh.good();) {
    std::string part;
    std::getline(mesh, part, ',');
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string name = part.substr(0, eq);
    const std::string size = eq == std::string::npos ? "" : part.substr(eq + 1);
    if (!axis.count(name))
      return bad("mesh axis '" + name + "': explore lays out pp, dp, ep, cp and tp");
    const std::optional<int64_t> n = wholeNumber(size);
    if (!n || *n < 1)
      return bad("mesh axis " + name + " wants a positive size, got '" + size + "'");
    if (outermostFirst.at(name) <= previous)
      return bad("the mesh's axes go pp, dp, ep, cp, tp from outermost, as explore numbers ranks");
    previous = outermostFirst.at(name);
    axis[name] = *n;
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
    if (value["--cp-attention"] != "all-gather" && value["--cp-attention"] != "ring" &&
        value["--cp-attention"] != "ulysses")
      return bad("--cp-attention is all-gather, ring or ulysses, got '" + value["--cp-attention"] +
                 "'");
    l.cpAttention = value["--cp-attention"];
  }
  l.sequenceParallel = value.count("--sequence-parallel") > 0;
  l.vocabParallel = value.count("--vocab-parallel") > 0;
  l.wholeVocabulary = value.count("--no-vocab-parallel") > 0;
  if (std::string why = unevenSplit(batch, l.microBatchesOrOne(), c.dp * c.ep); !why.empty())
    return bad(why);
  return c;
}

// Compiled, and over the budget (a failed compile has no memory plan).
bool overBudget(const ExploreCandidate& c, uint64_t budget) {
  return c.built && budget && c.memoryPerRank > budget;
}

}  // namespace

std::string ExploreCandidate::mesh() const {
  return "dp=" + std::to_string(dp) + (ep > 1 ? ",ep=" + std::to_string(ep) : "") +
         (cp > 1 ? ",cp=" + std::to_string(cp) : "") + ",tp=" + std::to_string(tp) +
         ",pp=" + std::to_string(pp);
}

bool ExploreCandidate::keepVocabularyWhole(const Status& failure) {
  if (tp <= 1 || layout.wholeVocabulary ||
      failure.message().find("vocabulary") == std::string::npos)
    return false;
  layout.wholeVocabulary = true;
  return true;
}

StatusOr<ExploreResult> explore(const std::vector<std::string>& compileArgs, int64_t devices,
                                const perf::DeviceProfile& profile, double memoryGiB,
                                bool exhaustive, ExploreMode mode,
                                const std::vector<std::string>& tries) {
  for (const std::string& a : compileArgs) {
    const std::string flag = a.substr(0, a.find('='));
    if (chosenFlags().count(flag))
      return Status::InvalidInput("dtc explore chooses " + flag +
                                  " for each candidate; leave it out");
  }
  if (devices < 1 || devices > (1 << 20))
    return Status::InvalidInput("--devices must be in [1, 2^20]");
  std::vector<std::string> base = compileArgs;
  DTC_ASSIGN_OR_RETURN(CompileRequest shared, parseCompileArgs(base));
  if (shared.options.device != profile.device) {
    bool given = false;
    for (const std::string& a : base) given |= a == "--device" || a.rfind("--device=", 0) == 0;
    if (given)
      return Status::InvalidInput("profile " + profile.name + " describes " + profile.device +
                                  " devices, but --device is " + shared.options.device);
    base.push_back("--device");
    base.push_back(profile.device);
  }
  const auto start = std::chrono::steady_clock::now();
  ExploreResult r;
  r.profile = profile;
  r.shared = base;
  r.devices = devices;
  r.budget = memoryGiB > 0 ? static_cast<uint64_t>(memoryGiB * double(uint64_t{1} << 30))
                           : profile.deviceMemoryBytes;
  const int64_t batch = shared.options.batchSize;
  std::vector<ExploreCandidate> given;
  for (const std::string& t : tries) {
    DTC_ASSIGN_OR_RETURN(ExploreCandidate c, givenLayout(t, devices, batch));
    given.push_back(std::move(c));
  }
  const int64_t experts = expertsDividing(shared);
  std::vector<ExploreCandidate> layouts = enumerateLayouts(devices, batch, false, experts);
  layouts.insert(layouts.end(), given.begin(), given.end());
  // A deep model over many devices: whole compiles would unroll every layer for every
  // micro-batch, so each candidate is priced from shallow copies instead, or screened by those
  // prices for the contenders that are then compiled whole.
  std::unique_ptr<LayerEstimator> estimator;
  bool screen = false;
  if (mode != ExploreMode::kExact) {
    std::string why;
    estimator = LayerEstimator::create(base, profile, &why);
    int64_t unrolled = 0, summed = 0;
    for (const ExploreCandidate& c : layouts)
      if (c.reason.empty()) {
        const int64_t u = (estimator ? estimator->layers() : 1) * c.layout.microBatchesOrOne();
        unrolled = std::max(unrolled, u);
        summed += u;
      }
    if (!estimator && mode == ExploreMode::kEstimate)
      return Status::InvalidInput("dtc explore --estimate: " + why);
    if (!estimator && mode == ExploreMode::kScreen)
      return Status::InvalidInput("dtc explore --screen: " + why);
    const bool oneTooDeep = unrolled > kLargestWholeCompile;
    if (estimator && mode == ExploreMode::kAuto && !oneTooDeep &&
        summed <= kLargestWholeExploration) {
      estimator.reset();
      r.estimateNote = "compiled whole: a candidate unrolls at most " + std::to_string(unrolled) +
                       " layer micro-batches, all of them " + std::to_string(summed);
    } else if (estimator &&
               (mode == ExploreMode::kScreen || (mode == ExploreMode::kAuto && !oneTooDeep))) {
      screen = true;
      r.estimated = true;
      r.estimateNote = "screened by estimates from three-layer copies of the " +
                       std::to_string(estimator->layers()) + "-layer stack";
    } else if (estimator) {
      r.estimated = true;
      layouts = enumerateLayouts(devices, batch, true, experts);
      for (const ExploreCandidate& c : given)
        if (!c.layout.stageCuts.empty())
          return Status::InvalidInput(
              "dtc explore --try: an estimate cuts the layers into stages itself; --stage-cuts "
              "needs --exact");
      layouts.insert(layouts.end(), given.begin(), given.end());
      r.estimateNote = "estimated from three-layer copies of the " +
                       std::to_string(estimator->layers()) + "-layer stack";
    } else {
      r.estimateNote = "compiled whole (" + why + ")";
    }
  }
  // Build every layout; the memory-saving settings (ZeRO-3, recomputation) only add work, so
  // they are built where the layout does not fit without them (or when asked for all).
  // Screening compiles the layouts the user gives whole from the start.
  std::vector<ExploreCandidate*> jobs, whole;
  for (ExploreCandidate& c : layouts)
    if (c.reason.empty()) (screen && c.given ? whole : jobs).push_back(&c);
  r.threads = static_cast<int>(buildAll(base, jobs, profile, r.budget, estimator.get()));
  buildAll(base, whole, profile, r.budget, nullptr);
  size_t verified = screen ? compileContenders(base, layouts, profile, r.budget) : 0;
  std::vector<size_t> later;  // variants to build once their layouts are known
  for (ExploreCandidate& c : layouts) {
    r.candidates.push_back(c);
    if (!c.built || c.given) continue;  // a given layout is priced as given
    // What saves memory at a cost in time: recomputation, and (from ZeRO-0's layout only) ZeRO-3.
    struct Saving {
      int64_t zero;
      const char* recompute;
    };
    std::vector<Saving> savings = {{-1, "selective"}, {-1, "full"}};
    if (c.dp > 1) {
      savings.push_back({3, ""});
      savings.push_back({3, "full"});
    }
    const bool zeroGiven = c.layout.zero >= 0;
    for (const Saving& saving : savings) {
      if (zeroGiven && saving.zero >= 0) continue;
      ExploreCandidate v = c;
      v.built = v.feasible = v.estimated = v.unpriced = false;
      v.buildSeconds = 0;
      // The variant gets its own cuts from its own prices.
      v.layout.stageCuts.clear();
      v.reason.clear();
      v.memoryPerRank = 0;
      v.prediction = {};
      if (saving.zero >= 0) v.layout.zero = saving.zero;
      if (*saving.recompute) v.layout.recompute = saving.recompute;
      v.skipped = !exhaustive && !overBudget(c, r.budget);
      if (!v.skipped)
        later.push_back(r.candidates.size());
      else
        v.reason = c.feasible ? "not built: the layout fits without it, which only adds work"
                              : "not built: the layout fails without it (" + c.reason + ")";
      r.candidates.push_back(v);
    }
  }
  jobs.clear();
  for (size_t k : later) jobs.push_back(&r.candidates[k]);
  r.threads = std::max(r.threads,
                       static_cast<int>(buildAll(base, jobs, profile, r.budget, estimator.get())));
  if (screen) verified += compileContenders(base, r.candidates, profile, r.budget);
  if (estimator)
    r.estimateNote += " (" + std::to_string(estimator->settings()) + " settings compiled)";
  if (screen)
    r.estimateNote += "; " + std::to_string(verified) + " compiled whole: those estimated within " +
                      std::to_string(int(100 * kContenderMargin)) +
                      "% of the fastest and of the budget, and those it cannot price";
  std::stable_sort(r.candidates.begin(), r.candidates.end(),
                   [](const ExploreCandidate& a, const ExploreCandidate& b) {
                     if (a.feasible != b.feasible) return a.feasible;
                     if (a.feasible) return a.prediction.stepSeconds < b.prediction.stepSeconds;
                     return a.built > b.built;
                   });
  if (!r.candidates.empty() && r.candidates.front().feasible) r.best = 0;
  for (const ExploreCandidate& c : r.candidates)
    if (c.built && c.prediction.flopsPerStep > 0 &&
        (r.modelFlops == 0 || c.prediction.flopsPerStep < r.modelFlops))
      r.modelFlops = c.prediction.flopsPerStep;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

double ExploreResult::modelUtilisation(const ExploreCandidate& c) const {
  if (c.prediction.flopsPerStep <= 0) return 0;
  return c.prediction.utilisation * modelFlops / c.prediction.flopsPerStep;
}

std::string whyItWon(const ExploreResult& r) {
  if (r.best < 0) return "no candidate fits";
  const ExploreCandidate& w = r.candidates[r.best];
  std::ostringstream os;
  os << w.mesh() << " is predicted fastest: " << explore_report::ms(w.prediction.stepSeconds)
     << " a step (compute " << explore_report::ms(w.prediction.computeSeconds)
     << ", exposed communication " << explore_report::ms(w.prediction.exposedCommunicationSeconds)
     << ", bubble " << explore_report::ms(w.prediction.bubbleSeconds) << "), "
     << explore_report::gib(w.memoryPerRank) << " per rank";
  for (const ExploreCandidate& c : r.candidates)
    if (&c != &w && c.feasible) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.3f",
                    c.prediction.stepSeconds / w.prediction.stepSeconds);
      os << "; the next, " << c.mesh() << " " << explore_report::join(c.flags()) << ", takes "
         << ratio << "x as long (compute " << explore_report::ms(c.prediction.computeSeconds)
         << ", exposed communication "
         << explore_report::ms(c.prediction.exposedCommunicationSeconds) << ", bubble "
         << explore_report::ms(c.prediction.bubbleSeconds) << ")";
      break;
    }
  return os.str();
}

StatusOr<std::vector<std::string>> chooseLayout(const std::vector<std::string>& compileArgs,
                                                int64_t devices, const std::string& profileName,
                                                double memoryGiB) {
  DTC_ASSIGN_OR_RETURN(perf::DeviceProfile profile, perf::loadProfile(profileName));
  DTC_ASSIGN_OR_RETURN(ExploreResult r,
                       explore(compileArgs, devices, profile, memoryGiB, /*exhaustive=*/false));
  if (r.best < 0)
    return Status::InvalidInput("--mesh auto: no layout of " + std::to_string(devices) +
                                " devices fits (dtc explore lists why)");
  llvm::outs() << "--mesh auto on " << profile.name << ": "
               << explore_report::join(r.candidates[r.best].flags()) << "\n  " << whyItWon(r)
               << "\n";
  std::vector<std::string> flags = r.candidates[r.best].flags();
  if (std::find(compileArgs.begin(), compileArgs.end(), "--device") == compileArgs.end() &&
      profile.device != "cpu")
    flags.insert(flags.end(), {"--device", profile.device});
  return flags;
}

}  // namespace dtc

namespace dtc {
namespace {

int failed(const Status& s) {
  std::fprintf(stderr, "dtc: error: %s\n", s.message().c_str());
  return s.exitCode();
}

}  // namespace

int runExplore(int argc, char** argv) {
  // Explore's own flags; everything else is `dtc compile`'s, shared by every candidate.
  static const std::set<std::string> valued = {"--devices", "--profile", "--gpus-per-node",
                                               "--top",     "--plot",    "--memory"};
  static const std::set<std::string> switches = {"--json", "--exhaustive", "--exact", "--estimate",
                                                 "--screen"};
  std::map<std::string, std::string> own;
  std::vector<std::string> compileArgs, tries;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    if (switches.count(arg)) {
      own[arg] = "";
    } else if (flag == "--try") {  // repeatable: each a layout to price beside the rest
      if (eq != std::string::npos)
        tries.push_back(arg.substr(eq + 1));
      else if (i + 1 < argc)
        tries.push_back(argv[++i]);
      else
        return failed(Status::InvalidInput("dtc explore: --try needs a value"));
    } else if (valued.count(flag)) {
      if (eq != std::string::npos)
        value = arg.substr(eq + 1);
      else if (i + 1 < argc)
        value = argv[++i];
      else
        return failed(Status::InvalidInput("dtc explore: " + flag + " needs a value"));
      own[flag] = value;
    } else {
      compileArgs.push_back(arg);
    }
  }
  auto number = [&](const std::string& flag, double fallback) -> StatusOr<double> {
    auto it = own.find(flag);
    if (it == own.end()) return fallback;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end || !(v > 0) || !std::isfinite(v))
      return Status::InvalidInput("dtc explore: " + flag + " wants a positive number, got '" +
                                  it->second + "'");
    return v;
  };
  if (!own.count("--devices"))
    return failed(Status::InvalidInput("dtc explore: --devices N is required"));
  StatusOr<double> devices = number("--devices", 0), memory = number("--memory", 0),
                   top = number("--top", 0), perNode = number("--gpus-per-node", 0);
  for (const auto* s : {&devices, &memory, &top, &perNode})
    if (!s->ok()) return failed(s->status());
  if (*devices != std::floor(*devices) || *perNode != std::floor(*perNode) ||
      *top != std::floor(*top))
    return failed(Status::InvalidInput(
        "dtc explore: --devices, --top and --gpus-per-node are whole numbers"));
  StatusOr<perf::DeviceProfile> profile =
      perf::loadProfile(own.count("--profile") ? own["--profile"] : "cpu");
  if (!profile.ok()) return failed(profile.status());
  if (*perNode > 0) profile->devicesPerNode = static_cast<int>(*perNode);
  const std::string plot = own.count("--plot") ? own["--plot"] : "";
  if (!plot.empty())
    if (Status s = io::checkOutputFile(plot, "--plot"); !s.ok()) return failed(s);
  if (own.count("--exact") + own.count("--estimate") + own.count("--screen") > 1)
    return failed(
        Status::InvalidInput("dtc explore: --exact, --estimate and --screen exclude each other"));
  const ExploreMode mode = own.count("--exact")      ? ExploreMode::kExact
                           : own.count("--estimate") ? ExploreMode::kEstimate
                           : own.count("--screen")   ? ExploreMode::kScreen
                                                     : ExploreMode::kAuto;
  StatusOr<ExploreResult> r = explore(compileArgs, static_cast<int64_t>(*devices), *profile,
                                      *memory, own.count("--exhaustive") > 0, mode, tries);
  if (!r.ok()) return failed(r.status());
  const std::string out = own.count("--json") ? explore_report::json(*r)
                                              : explore_report::table(*r, static_cast<int>(*top));
  std::fputs(out.c_str(), stdout);
  if (!plot.empty()) {
    const std::string picture = explore_report::svg(*r);
    if (Status s = io::writeFileAtomically(plot, picture.data(), picture.size()); !s.ok())
      return failed(s);
  }
  return 0;
}

}  // namespace dtc
