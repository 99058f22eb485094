#include "exec/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "data/init.h"
#include "exec/shard_layout.h"
#include "support/printable.h"

namespace dtc {

int64_t TensorView::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

const plan::Attr* findAttr(const plan::Step& step, const char* name) {
  if (step.attrs())
    for (const plan::Attr* a : *step.attrs())
      if (a->name()->str() == name) return a;
  return nullptr;
}

// Page-aligned, zero-filled memory straight from the kernel: pages are only touched when a
// kernel first writes them, so a large arena costs nothing until used.
uint8_t* allocateRegion(uint64_t bytes, uint64_t& mapped) {
  mapped = std::max<uint64_t>(bytes, 4096);
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

// Creating a group's communicator is collective over the whole job (MPI_Comm_split), but the
// ranks of different pipeline stages bind different steps. So every rank creates, up front and
// in plan order, each group any stage will use: the collectives' axes, and the axes that cut
// state (saving gathers it) and bindings (evaluation sums accuracy over a data input's).
Status createGroups(const Plan& plan, comm::DeviceMesh& mesh) {
  const int meshAxes = static_cast<int>(mesh.sizes().size());
  auto create = [&](const auto* axes) -> Status {
    std::vector<int> list;
    if (axes)
      for (auto a : *axes) {
        if (a < 0 || a >= meshAxes) return Status::Ok();  // an error where it is used
        list.push_back(static_cast<int>(a));
      }
    return mesh.group(list).status();
  };
  using Sharding = flatbuffers::Vector<flatbuffers::Offset<plan::DimSharding>>;
  auto createCuts = [&](const Sharding* sharding) -> Status {
    if (sharding)
      for (const plan::DimSharding* d : *sharding)
        if (d->axes() && d->axes()->size()) DTC_RETURN_IF_ERROR(create(d->axes()));
    return Status::Ok();
  };
  for (const plan::Function* f : *plan.root().functions()) {
    for (const plan::Step* step : *f->steps())
      if (const plan::Attr* a = findAttr(*step, "axes"); a && a->ints())
        DTC_RETURN_IF_ERROR(create(a->ints()));
    for (const auto* bindings : {f->arguments(), f->results()})
      for (const plan::Binding* b : *bindings) DTC_RETURN_IF_ERROR(createCuts(b->sharding()));
  }
  for (const plan::StateTensor* s : *plan.root().state())
    DTC_RETURN_IF_ERROR(createCuts(s->sharding()));
  return Status::Ok();
}

}  // namespace

int64_t StepContext::intAttr(const char* name) const {
  const plan::Attr* a = findAttr(step, name);
  return a ? a->i() : 0;
}

double StepContext::floatAttr(const char* name) const {
  const plan::Attr* a = findAttr(step, name);
  return a ? a->f() : 0.0;
}

std::vector<int64_t> StepContext::intsAttr(const char* name) const {
  const plan::Attr* a = findAttr(step, name);
  if (!a || !a->ints()) return {};
  return {a->ints()->begin(), a->ints()->end()};
}

std::string StepContext::stringAttr(const char* name) const {
  const plan::Attr* a = findAttr(step, name);
  return a && a->s() ? a->s()->str() : std::string();
}

std::string StepContext::where() const {
  std::string loc = step.loc() ? step.loc()->str() : "";
  return step.op()->str() + (loc.empty() ? "" : " at " + loc) + ": ";
}

Executor::Executor(const Plan& plan, int threads, comm::DeviceMesh* mesh)
    : plan_(plan), pool_(threads), mesh_(mesh) {}

Executor::~Executor() {
  if (state_) ::munmap(state_, stateMapped_);
  if (arena_) ::munmap(arena_, arenaMapped_);
}

StatusOr<std::unique_ptr<Executor>> Executor::create(const Plan& plan, int threads,
                                                     comm::DeviceMesh* mesh) {
  std::unique_ptr<Executor> ex(new Executor(plan, threads, mesh));
  const plan::Plan& root = plan.root();
  if (plan.stages() > 0) {
    // Verified: the pipeline axis is an axis of the plan's mesh.
    if (!mesh || mesh->sizes().size() != root.mesh()->size())
      return Status::InvalidInput(plan.name() + " is a pipeline: it runs on its device mesh only");
    ex->stage_ = static_cast<int>(mesh->coords()[root.pipeline_axis()]);
    DTC_RETURN_IF_ERROR(createGroups(plan, *mesh));
  }
  ex->arenaBytes_ = plan.maxArenaBytes(ex->stage_);
  // Offsets of different stages overlap: state_bytes is the largest stage's region.
  ex->stateBytes_ = ex->stage_ < 0 ? root.state_bytes() : 0;
  if (ex->stage_ >= 0)
    for (const plan::StateTensor* s : *root.state())
      if (Plan::onStage(s->stage(), ex->stage_))
        ex->stateBytes_ = std::max<uint64_t>(
            ex->stateBytes_, s->offset() + numElements(s->shape()) * dtypeSize(toDType(s->dtype())));
  // The whole region all the same: a function's state values are verified against it, and
  // pages never touched cost nothing.
  ex->state_ = allocateRegion(root.state_bytes(), ex->stateMapped_);
  ex->arena_ = allocateRegion(ex->arenaBytes_, ex->arenaMapped_);
  if (!ex->state_ || !ex->arena_)
    return Status::Internal("cannot allocate " +
                            std::to_string(root.state_bytes() + ex->arenaBytes_) +
                            " bytes for the plan's memory");
  for (const plan::Function* f : *root.functions())
    if (Plan::onStage(f->stage(), ex->stage_)) DTC_RETURN_IF_ERROR(ex->prepare(*f));
  return ex;
}

const plan::Function* Executor::function(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second.function;
}

TensorView Executor::view(const std::string& function, uint32_t index) const {
  const plan::Function& f = *functions_.at(function).function;
  const plan::Value& v = *f.values()->Get(index);
  TensorView t;
  t.data = (v.region() == plan::Region::state ? state_ : arena_) + v.offset();
  t.dtype = toDType(v.dtype());
  if (v.shape()) t.shape.assign(v.shape()->begin(), v.shape()->end());
  return t;
}

TensorView Executor::state(const std::string& name) const {
  const plan::StateTensor* s = plan_.stateTensor(name, stage_);
  if (!s) return {};
  TensorView t;
  t.data = state_ + s->offset();
  t.dtype = toDType(s->dtype());
  if (s->shape()) t.shape.assign(s->shape()->begin(), s->shape()->end());
  return t;
}

Status Executor::prepare(const plan::Function& function) {
  std::string name = function.name()->str();
  PreparedFunction& prepared = functions_[name];
  prepared.function = &function;
  for (uint32_t i = 0; i < plan_.root().functions()->size(); ++i)
    if (plan_.root().functions()->Get(i) == &function) prepared.index = i;
  if (function.steps())
    for (const plan::Step* step : *function.steps()) {
      StepContext ctx{*step, {}, {}, pool_, mesh_};
      if (step->inputs())
        for (uint32_t i : *step->inputs()) ctx.inputs.push_back(view(name, i));
      if (step->outputs())
        for (uint32_t i : *step->outputs()) ctx.outputs.push_back(view(name, i));
      StatusOr<BoundStep> bound = bindCpuStep(ctx);
      if (!bound.ok())
        return bound.status().withContext(plan_.name() + ": function '" + name + "'");
      prepared.steps.push_back(std::move(bound).value());
    }
  if (function.results())
    for (const plan::Binding* b : *function.results()) {
      if (b->role() != plan::Role::param && b->role() != plan::Role::optim_state) continue;
      TensorView from = view(name, b->value());
      TensorView to = state(b->name()->str());
      if (!to.data || to.shape != from.shape || to.dtype != from.dtype)
        return Status::InvalidInput(plan_.name() + " is invalid: function '" + name +
                                    "' updates unknown or mismatched state '" +
                                    printable(b->name()->str()) + "'");
      if (from.data != to.data) prepared.writeBacks.emplace_back(from, to);
    }
  return Status::Ok();
}

Status Executor::initializeState() {
  const plan::Plan& p = plan_.root();
  for (const plan::StateTensor* s : *p.state()) {
    if (!Plan::onStage(s->stage(), stage_)) continue;  // another stage's
    uint8_t* dst = state_ + s->offset();
    // Init rules and stored values describe the whole tensor: a sharded one is materialised
    // whole, then this device keeps its block (counter-based rules make the block independent
    // of how the tensor is cut).
    std::vector<int64_t> local(s->shape()->begin(), s->shape()->end());
    std::vector<int64_t> global = s->global_shape()
                                      ? std::vector<int64_t>(s->global_shape()->begin(), s->global_shape()->end())
                                      : local;
    std::vector<DimCut> cuts = cutsOf(s->sharding(), local.size(), mesh_);
    const bool sharded = isSharded(cuts);
    const size_t elementSize = dtypeSize(toDType(s->dtype()));
    std::vector<uint8_t> whole;
    int64_t n = numElements(s->shape());
    uint8_t* target = dst;
    if (sharded) {
      n = 1;
      for (int64_t d : global) n *= d;
      whole.resize(static_cast<size_t>(n) * elementSize);
      target = whole.data();
    }
    size_t bytes = static_cast<size_t>(n) * elementSize;
    switch (s->init()) {
      case plan::InitKind::data:
        std::memcpy(target, p.constants()->data() + s->data_offset(), bytes);
        break;
      case plan::InitKind::zeros:
        std::memset(target, 0, bytes);
        break;
      default: {
        if (s->dtype() != plan::DType::f32)
          return Status::InvalidInput("init rules apply to float32 tensors only ('" +
                                      s->name()->str() + "')");
        data::InitKind kind = s->init() == plan::InitKind::ones       ? data::InitKind::kOnes
                              : s->init() == plan::InitKind::uniform ? data::InitKind::kUniform
                                                                     : data::InitKind::kNormal;
        data::fillInit(kind, s->init_a(), s->init_b(), s->init_seed(), s->name()->str(),
                       reinterpret_cast<float*>(target), n);
      }
    }
    if (sharded) extractShard(whole.data(), global, elementSize, cuts, dst);
  }
  return Status::Ok();
}

Status Executor::run(const std::string& function) {
  auto it = functions_.find(function);
  if (it == functions_.end())
    return Status::InvalidInput(plan_.name() + " has no function '" + function + "'");
  if (timing_) {
    auto now = [] {
      return std::chrono::duration<double, std::micro>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    for (size_t k = 0; k < it->second.steps.size(); ++k) {
      double start = now();
      DTC_RETURN_IF_ERROR(it->second.steps[k]());
      timings_.push_back({it->second.index, static_cast<uint32_t>(k), start, now()});
    }
  } else {
    for (const BoundStep& step : it->second.steps) DTC_RETURN_IF_ERROR(step());
  }
  // A pipeline's sends are buffered (they must not block: neighbours send to each other);
  // the function is done when they are.
  if (mesh_) DTC_RETURN_IF_ERROR(mesh_->completeSends());
  for (auto& [from, to] : it->second.writeBacks)
    std::memcpy(to.data, from.data, static_cast<size_t>(from.numElements()) * dtypeSize(from.dtype));
  return Status::Ok();
}

}  // namespace dtc
