#include "planner/Explore.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "llvm/Support/raw_ostream.h"

#include "io/files.h"
#include "planfile/plan.h"
#include "planner/CommandFlags.h"
#include "planner/CompileRequest.h"
#include "planner/ExploreEstimate.h"
#include "planner/ExploreLayouts.h"
#include "planner/ExploreReport.h"
#include "planner/MemoryFit.h"
#include "source/ModelSource.h"

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
                                              "--no-cp-load-balance",
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
      if (c.keepVocabularyWhole(bytes.status()) || c.keepSequenceOrder(bytes.status())) continue;
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

// Explore compiles and simulates thousands of candidates, each allocating and freeing megabytes
// (a schedule of a thousand micro-batches over many stages is a quarter of a million units).
// glibc would give the freed memory back to the system and fault it in again for the next
// candidate, page by page, for a third of the exploration's time; kept, it is reused.
void keepFreedMemory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
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

bool ExploreCandidate::keepSequenceOrder(const Status& failure) {
  if (cp <= 1 || layout.contiguousSequence ||
      failure.message().find("--no-cp-load-balance") == std::string::npos)
    return false;
  layout.contiguousSequence = true;
  return true;
}

StatusOr<ExploreResult> explore(const std::vector<std::string>& compileArgs, int64_t devices,
                                const perf::DeviceProfile& profile, double memoryGiB,
                                bool exhaustive, ExploreMode mode,
                                const std::vector<std::string>& tries) {
  keepFreedMemory();
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
  // A model that cannot be read is one error, not one for every candidate.
  {
    llvm::Expected<ModelFile> model = readModelSource(shared.model, shared.onnx, shared.folder);
    if (!model) return Status::InvalidInput(llvm::toString(model.takeError()));
  }
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
  SplitAxes axes;
  axes.experts = expertsDividing(shared);
  axes.perNode = profile.devicesPerNode;
  axes.everyContextSplit = exhaustive;
  std::vector<ExploreCandidate> layouts = enumerateLayouts(devices, batch, false, axes);
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
      axes.chunks = estimator->mostChunks();
      layouts = enumerateLayouts(devices, batch, true, axes);
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
  // A model without causal attention has no sequence to split: its context-parallel layouts go.
  layouts.erase(std::remove_if(layouts.begin(), layouts.end(), dropsContextSplit), layouts.end());
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
  // Context parallelism's other attention methods, beside each all-gather layout (or its
  // memory-saving variant) that fits, or might once compiled whole (all of them when asked).
  std::vector<ExploreCandidate> methods;
  for (const ExploreCandidate& c : r.candidates)
    if (c.cp > 1 && !c.given && c.layout.cpAttention == "all-gather" &&
        (exhaustive || c.feasible || c.unpriced ||
         (c.built && c.memoryPerRank > 0 &&
          double(c.memoryPerRank) <= (1 + kContenderMargin) * double(r.budget))))
      for (ExploreCandidate& v : otherAttentionMethods(c)) methods.push_back(std::move(v));
  const size_t firstMethod = r.candidates.size();
  r.candidates.insert(r.candidates.end(), methods.begin(), methods.end());
  jobs.clear();
  for (size_t k = firstMethod; k < r.candidates.size(); ++k) jobs.push_back(&r.candidates[k]);
  buildAll(base, jobs, profile, r.budget, estimator.get());
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
  // Explore's own flags; everything else is `dtc compile`'s, shared by every candidate. --try
  // is repeatable: each a layout to price beside the rest.
  StatusOr<CommandFlags> own = takeCommandFlags(
      std::vector<std::string>(argv + 2, argv + argc),
      {"--devices", "--profile", "--gpus-per-node", "--top", "--plot", "--memory", "--try"},
      {"--json", "--exhaustive", "--exact", "--estimate", "--screen"}, "dtc explore");
  if (!own.ok()) return failed(own.status());
  const std::vector<std::string>& compileArgs = own->rest;
  const std::vector<std::string> tries =
      own->values.count("--try") ? own->values.at("--try") : std::vector<std::string>();
  auto number = [&](const std::string& flag, double fallback) -> StatusOr<double> {
    if (!own->has(flag)) return fallback;
    const std::string text = own->value(flag);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !(v > 0) || !std::isfinite(v))
      return Status::InvalidInput("dtc explore: " + flag + " wants a positive number, got '" +
                                  text + "'");
    return v;
  };
  if (!own->has("--devices"))
    return failed(Status::InvalidInput("dtc explore: --devices N is required"));
  StatusOr<double> devices = number("--devices", 0), memory = number("--memory", 0),
                   top = number("--top", 0), perNode = number("--gpus-per-node", 0);
  for (const auto* s : {&devices, &memory, &top, &perNode})
    if (!s->ok()) return failed(s->status());
  if (*devices != std::floor(*devices) || *perNode != std::floor(*perNode) ||
      *top != std::floor(*top))
    return failed(Status::InvalidInput(
        "dtc explore: --devices, --top and --gpus-per-node are whole numbers"));
  StatusOr<perf::DeviceProfile> profile = perf::loadProfile(own->value("--profile", "cpu"));
  if (!profile.ok()) return failed(profile.status());
  if (*perNode > 0) profile->devicesPerNode = static_cast<int>(*perNode);
  const std::string plot = own->value("--plot");
  if (!plot.empty())
    if (Status s = io::checkOutputFile(plot, "--plot"); !s.ok()) return failed(s);
  if (own->has("--exact") + own->has("--estimate") + own->has("--screen") > 1)
    return failed(
        Status::InvalidInput("dtc explore: --exact, --estimate and --screen exclude each other"));
  const ExploreMode mode = own->has("--exact")      ? ExploreMode::kExact
                           : own->has("--estimate") ? ExploreMode::kEstimate
                           : own->has("--screen")   ? ExploreMode::kScreen
                                                    : ExploreMode::kAuto;
  StatusOr<ExploreResult> r = explore(compileArgs, static_cast<int64_t>(*devices), *profile,
                                      *memory, own->has("--exhaustive"), mode, tries);
  if (!r.ok()) return failed(r.status());
  const std::string out = own->has("--json") ? explore_report::json(*r)
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
