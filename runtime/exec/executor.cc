#include "exec/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "comm/watchdog.h"
#include "data/init.h"
#include "exec/kernel_contract.h"
#include "exec/shard_layout.h"
#include "ops/kernel_registry.h"
#include "support/printable.h"

namespace dtc {

namespace {

// Microseconds of the system-wide monotonic clock (comparable between processes on one machine).
double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
      if (const plan::Attr* a = findStepAttr(*step, "axes"); a && a->ints())
        DTC_RETURN_IF_ERROR(create(a->ints()));
    for (const auto* bindings : {f->arguments(), f->results()})
      for (const plan::Binding* b : *bindings) DTC_RETURN_IF_ERROR(createCuts(b->sharding()));
  }
  for (const plan::StateTensor* s : *plan.root().state())
    DTC_RETURN_IF_ERROR(createCuts(s->sharding()));
  return Status::Ok();
}

}  // namespace

Executor::Executor(const Plan& plan, int threads, comm::DeviceMesh* mesh,
                   std::unique_ptr<Backend> backend)
    : plan_(plan), pool_(threads), mesh_(mesh), backend_(std::move(backend)) {}

Executor::~Executor() {
  backend_->release(state_, stateAllocated_);
  backend_->release(arena_, arenaAllocated_);
}

StatusOr<std::unique_ptr<Executor>> Executor::create(const Plan& plan, int threads,
                                                     comm::DeviceMesh* mesh,
                                                     std::unique_ptr<Backend> backend,
                                                     const std::set<std::string>& functions) {
  if (!backend) return Status::Internal("an executor needs a backend");
  std::unique_ptr<Executor> ex(new Executor(plan, threads, mesh, std::move(backend)));
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
        ex->stateBytes_ =
            std::max<uint64_t>(ex->stateBytes_, s->offset() + numElements(s->shape()) *
                                                                  dtypeSize(toDType(s->dtype())));
  // The whole region all the same: a function's state values are verified against it, and
  // pages never touched cost nothing.
  Backend& device = *ex->backend_;
  auto allocate = [&](uint64_t bytes, uint8_t*& region, uint64_t& allocated) -> Status {
    StatusOr<uint8_t*> memory = device.allocate(bytes);
    if (!memory.ok())
      return memory.status().withContext(plan.name() + ": the plan's memory on " + device.name());
    region = *memory;
    allocated = bytes;
    return Status::Ok();
  };
  // Before any allocation: a plan too big for this machine is one error saying how much it
  // needs, not an out-of-memory kill halfway through.
  const uint64_t need = root.state_bytes() + ex->arenaBytes_;
  const uint64_t available = device.availableBytes();
  if (available > 0 && need > available) {
    char text[256];
    std::snprintf(
        text, sizeof text,
        ": this rank needs %.2f GiB on %s (state %.2f GiB + arena %.2f GiB), %.2f GiB is available",
        need / 1073741824.0, device.name().c_str(), root.state_bytes() / 1073741824.0,
        ex->arenaBytes_ / 1073741824.0, available / 1073741824.0);
    return Status::InvalidInput(
        plan.name() + text +
        " (partition it over more devices with dtc compile --mesh, or --zero)");
  }
  DTC_RETURN_IF_ERROR(allocate(root.state_bytes(), ex->state_, ex->stateAllocated_));
  DTC_RETURN_IF_ERROR(allocate(ex->arenaBytes_, ex->arena_, ex->arenaAllocated_));
  // The GEMM libraries' workspace opens the arena of every function (the plan verified it fits).
  if (root.workspace_bytes() > 0)
    DTC_RETURN_IF_ERROR(device.useWorkspace(ex->arena_, root.workspace_bytes())
                            .withContext(plan.name() + ": the plan's GEMM workspace"));
  if (!device.hostMemory()) ex->hostState_.reset(new uint8_t[root.state_bytes()]());
  for (const plan::Function* f : *root.functions())
    if (Plan::onStage(f->stage(), ex->stage_) &&
        (functions.empty() || functions.count(f->name()->str())))
      DTC_RETURN_IF_ERROR(ex->prepare(*f));
  return ex;
}

const plan::Function* Executor::function(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second.function;
}

TensorView Executor::view(const std::string& function, uint32_t index) const {
  TensorView t = deviceView(function, index);
  if (backend_->hostMemory()) return t;
  const PreparedFunction& prepared = functions_.at(function);
  auto it = prepared.hostCopies.find(index);
  t.data = it == prepared.hostCopies.end() ? nullptr : it->second.get();
  return t;
}

TensorView Executor::deviceView(const std::string& function, uint32_t index) const {
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
  t.data = hostState() + s->offset();
  t.dtype = toDType(s->dtype());
  if (s->shape()) t.shape.assign(s->shape()->begin(), s->shape()->end());
  return t;
}

Status Executor::readStateRows(const std::string& name, uint64_t offset, uint64_t rowBytes,
                               uint64_t pitch, uint64_t rows, void* to) const {
  const plan::StateTensor* s = plan_.stateTensor(name, stage_);
  if (!s) return Status::Internal("this rank holds no state '" + name + "'");
  if (rows == 0) return Status::Ok();
  const uint64_t size =
      static_cast<uint64_t>(numElements(s->shape())) * dtypeSize(toDType(s->dtype()));
  const bool fits = (rows == 1 || pitch >= rowBytes) && offset <= size &&
                    (rows - 1) <= (size - offset) / std::max<uint64_t>(pitch, 1) &&
                    rowBytes <= size - offset - (rows - 1) * pitch;
  if (!fits)
    return Status::Internal("reading " + std::to_string(rows) + " rows of " +
                            std::to_string(rowBytes) + " bytes, " + std::to_string(pitch) +
                            " apart, from byte " + std::to_string(offset) + " of state '" + name +
                            "' of " + std::to_string(size));
  const uint8_t* from = state_ + s->offset() + offset;
  if (!backend_->hostMemory()) return backend_->downloadRows(to, from, rowBytes, pitch, rows);
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<uint8_t*>(to) + r * rowBytes, from + r * pitch, rowBytes);
  return Status::Ok();
}

Status Executor::prepare(const plan::Function& function) {
  std::string name = function.name()->str();
  PreparedFunction& prepared = functions_[name];
  prepared.function = &function;
  for (uint32_t i = 0; i < plan_.root().functions()->size(); ++i)
    if (plan_.root().functions()->Get(i) == &function) prepared.index = i;
  backend_->beginFunction(name);
  std::optional<size_t> firstStateWrite;
  if (function.steps())
    for (const plan::Step* step : *function.steps()) {
      StepContext ctx{*step, {}, {}, pool_, mesh_};
      if (step->scratch_bytes() > 0) {
        ctx.scratch = arena_ + step->scratch_offset();
        ctx.scratchBytes = step->scratch_bytes();
      }
      ctx.unplannedBytes = &unplannedBytes_;
      if (step->inputs())
        for (uint32_t i : *step->inputs()) ctx.inputs.push_back(deviceView(name, i));
      if (step->outputs())
        for (uint32_t i : *step->outputs()) ctx.outputs.push_back(deviceView(name, i));
      const bool writesState = std::any_of(ctx.outputs.begin(), ctx.outputs.end(), [&](auto& t) {
        return t.data >= state_ && t.data < state_ + stateAllocated_;
      });
      if (writesState && !firstStateWrite) firstStateWrite = prepared.steps.size();
      // The kernel's contract first (both backends' acceptance), then the backend's own limits.
      Status contract = checkKernelContract(ctx);
      StatusOr<BoundStep> bound =
          contract.ok() ? backend_->bind(ctx) : StatusOr<BoundStep>(contract);
      if (!bound.ok())
        return bound.status().withContext(plan_.name() + ": function '" + name + "'");
      if (mesh_ && mesh_->numDevices() > 1) {
        // A wait that times out is reported with the step it came from.
        const std::string loc = step->loc() ? step->loc()->str() : std::string();
        prepared.labels.push_back(
            (loc.empty() ? std::string("step ") + std::to_string(prepared.steps.size())
                         : "node '" + printable(loc) + "'") +
            " (" + kernelName(step->kernel()) + ")");
        const std::string* label = &prepared.labels.back();
        prepared.steps.push_back([label, inner = std::move(bound).value()] {
          comm::setNode(label);
          return inner();
        });
        continue;
      }
      prepared.steps.push_back(std::move(bound).value());
    }
  prepared.firstStateWrite = firstStateWrite.value_or(prepared.steps.size());
  prepared.run = backend_->endFunction(prepared.steps);
  if (function.results())
    for (const plan::Binding* b : *function.results()) {
      if (b->role() != plan::Role::param && b->role() != plan::Role::optim_state) continue;
      TensorView from = deviceView(name, b->value());
      TensorView to = state(b->name()->str());
      if (to.data) to.data = state_ + (to.data - hostState());  // the backend's copy
      if (!to.data || to.shape != from.shape || to.dtype != from.dtype)
        return Status::InvalidInput(plan_.name() + " is invalid: function '" + name +
                                    "' updates unknown or mismatched state '" +
                                    printable(b->name()->str()) + "'");
      if (from.data != to.data) prepared.writeBacks.emplace_back(from, to);
    }
  if (!backend_->hostMemory()) {
    // Host copies of what the trainer fills (data) and reads (loss, outputs).
    auto hostCopy = [&](uint32_t index, std::vector<uint32_t>& list) {
      if (prepared.hostCopies.count(index)) return;
      const plan::Value& v = *function.values()->Get(index);
      prepared.hostCopies[index].reset(new uint8_t[valueBytes(v)]());
      list.push_back(index);
    };
    if (function.arguments())
      for (const plan::Binding* b : *function.arguments())
        if (b->role() == plan::Role::data || b->role() == plan::Role::hyper)
          hostCopy(b->value(), prepared.uploads);
    if (function.results())
      for (const plan::Binding* b : *function.results())
        if (b->role() == plan::Role::loss || b->role() == plan::Role::output ||
            b->role() == plan::Role::metric)
          hostCopy(b->value(), prepared.downloads);
  }
  return Status::Ok();
}

StatusOr<float> Executor::readScalarState(const std::string& name) const {
  const plan::StateTensor* s = plan_.stateTensor(name, stage_);
  if (!s || s->dtype() != plan::DType::f32 || numElements(s->shape()) != 1)
    return Status::Internal(plan_.name() + " has no float32 scalar state '" + name + "'");
  float value = 0;
  if (backend_->hostMemory()) {
    std::memcpy(&value, state_ + s->offset(), sizeof value);
    return value;
  }
  DTC_RETURN_IF_ERROR(backend_->download(&value, state_ + s->offset(), sizeof value));
  return value;
}

StatusOr<int64_t> Executor::firstNonFiniteOf(const std::string& function,
                                             const PreparedFunction& prepared, uint32_t index,
                                             std::vector<uint8_t>& host) const {
  const TensorView t = deviceView(function, index);
  const uint8_t* data = t.data;
  if (!backend_->hostMemory()) {
    host.resize(valueBytes(*prepared.function->values()->Get(index)));
    DTC_RETURN_IF_ERROR(backend_->download(host.data(), t.data, host.size()));
    data = host.data();
  }
  return firstNonFinite(data, t.numElements(), t.dtype);
}

Status Executor::checkData(const std::string& function, const PreparedFunction& prepared) const {
  std::vector<uint8_t> host;
  for (const plan::Binding* b : *prepared.function->arguments()) {
    if (b->role() != plan::Role::data) continue;
    DTC_ASSIGN_OR_RETURN(int64_t bad, firstNonFiniteOf(function, prepared, b->value(), host));
    if (bad >= 0)
      return Status::NonFinite(
          plan_.name() + ": " + function + ": data input '" + printable(b->name()->str()) +
          "' holds inf or NaN (element " + std::to_string(bad) + " of this batch's " +
          std::to_string(deviceView(function, b->value()).numElements()) + ")");
  }
  return Status::Ok();
}

Status Executor::checkOutputs(const std::string& function, const PreparedFunction& prepared,
                              size_t k) const {
  const plan::Step& step = *prepared.function->steps()->Get(static_cast<uint32_t>(k));
  if (!step.outputs()) return Status::Ok();
  std::vector<uint8_t> host;
  for (uint32_t o = 0; o < step.outputs()->size(); ++o) {
    const uint32_t index = step.outputs()->Get(o);
    DTC_ASSIGN_OR_RETURN(int64_t bad, firstNonFiniteOf(function, prepared, index, host));
    if (bad < 0) continue;
    const TensorView t = deviceView(function, index);
    const std::string loc = step.loc() ? printable(step.loc()->str()) : std::string();
    return Status::NonFinite(plan_.name() + ": " + function + " step " + std::to_string(k) + ", " +
                             (loc.empty() ? std::string("a step") : "node '" + loc + "'") + " (" +
                             kernelName(step.kernel()) + "): output " + std::to_string(o) +
                             " holds inf or NaN (element " + std::to_string(bad) + " of " +
                             std::to_string(t.numElements()) +
                             "), the first op of this step whose output is not finite");
  }
  return Status::Ok();
}

Status Executor::pullState() {
  if (backend_->hostMemory()) return Status::Ok();
  return backend_->download(hostState_.get(), state_, stateAllocated_);
}

Status Executor::finishStateRead() {
  if (!stateReader_) return Status::Ok();
  std::function<Status()> finish = std::move(stateReader_);
  stateReader_ = nullptr;
  return finish();
}

Status Executor::pushState() {
  DTC_RETURN_IF_ERROR(finishStateRead());
  if (backend_->hostMemory()) return Status::Ok();
  return backend_->upload(state_, hostState_.get(), stateAllocated_);
}

Status Executor::initializeState() {
  const plan::Plan& p = plan_.root();
  for (const plan::StateTensor* s : *p.state()) {
    if (!Plan::onStage(s->stage(), stage_)) continue;  // another stage's
    uint8_t* dst = hostState() + s->offset();
    // Init rules and stored values describe the whole tensor: a sharded one is materialised
    // whole, then this device keeps its block (counter-based rules make the block independent
    // of how the tensor is cut).
    std::vector<int64_t> local(s->shape()->begin(), s->shape()->end());
    std::vector<int64_t> global =
        s->global_shape()
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
      case plan::InitKind::zeros: std::memset(target, 0, bytes); break;
      default: {
        if (s->dtype() != plan::DType::f32)
          return Status::InvalidInput("init rules apply to float32 tensors only ('" +
                                      s->name()->str() + "')");
        data::InitKind kind = s->init() == plan::InitKind::ones      ? data::InitKind::kOnes
                              : s->init() == plan::InitKind::uniform ? data::InitKind::kUniform
                                                                     : data::InitKind::kNormal;
        data::fillInit(kind, s->init_a(), s->init_b(), s->init_seed(), s->name()->str(),
                       reinterpret_cast<float*>(target), n);
      }
    }
    if (sharded) extractShard(whole.data(), global, elementSize, cuts, dst);
  }
  return pushState();
}

Status Executor::run(const std::string& function) {
  auto it = functions_.find(function);
  if (it == functions_.end())
    return Status::InvalidInput(plan_.name() + " has no function '" + function + "'");
  PreparedFunction& prepared = it->second;
  const double runStartUs = timing_ ? nowUs() : 0;
  const uint32_t call = timing_ ? calls_[prepared.index]++ : 0;
  if (mesh_ && mesh_->numDevices() > 1) {
    comm::setFunction(function);
    comm::setNode(nullptr);
  }
  auto bytesOf = [&](uint32_t index) {
    return valueBytes(*prepared.function->values()->Get(index));
  };
  for (uint32_t index : prepared.uploads)
    DTC_RETURN_IF_ERROR(backend_->upload(deviceView(function, index).data,
                                         prepared.hostCopies.at(index).get(), bytesOf(index)));
  if (checkNumerics_) {
    // The data first (inf or NaN in a batch is the commonest cause), then step by step, each
    // output scanned (device backends: downloaded) as it is written.
    DTC_RETURN_IF_ERROR(checkData(function, prepared));
    for (size_t k = 0; k < prepared.steps.size(); ++k) {
      if (k == prepared.firstStateWrite) DTC_RETURN_IF_ERROR(finishStateRead());
      DTC_RETURN_IF_ERROR(prepared.steps[k]());
      DTC_RETURN_IF_ERROR(backend_->synchronize());
      DTC_RETURN_IF_ERROR(checkOutputs(function, prepared, k));
    }
  } else if (timing_) {
    const bool device = !backend_->hostMemory();
    for (size_t k = 0; k < prepared.steps.size(); ++k) {
      if (k == prepared.firstStateWrite) DTC_RETURN_IF_ERROR(finishStateRead());
      double start = nowUs();
      DTC_RETURN_IF_ERROR(prepared.steps[k]());
      if (device) DTC_RETURN_IF_ERROR(backend_->synchronize());
      timings_.push_back({prepared.index, static_cast<uint32_t>(k), call, start, nowUs()});
    }
  } else {
    // A backend's replacement of the steps (a device's graph) runs them all at once.
    const size_t firstWrite =
        prepared.run.size() == prepared.steps.size() ? prepared.firstStateWrite : 0;
    for (size_t k = 0; k < prepared.run.size(); ++k) {
      if (k == firstWrite) DTC_RETURN_IF_ERROR(finishStateRead());
      DTC_RETURN_IF_ERROR(prepared.run[k]());
    }
  }
  // A pipeline's sends are buffered (they must not block: neighbours send to each other);
  // the function is done when they are.
  if (mesh_) DTC_RETURN_IF_ERROR(mesh_->completeSends());
  if (mesh_ && mesh_->numDevices() > 1) comm::setNode(nullptr);
  if (!prepared.writeBacks.empty()) DTC_RETURN_IF_ERROR(finishStateRead());
  for (auto& [from, to] : prepared.writeBacks)
    DTC_RETURN_IF_ERROR(backend_->copy(
        to.data, from.data, static_cast<uint64_t>(from.numElements()) * dtypeSize(from.dtype)));
  {
    // A device's collectives (NCCL) complete on its stream: a rank that stopped holds the
    // others up here, so the watchdog times this wait like a collective.
    std::optional<comm::ExternalWait> watched;
    if (mesh_ && mesh_->numDevices() > 1 && !backend_->hostMemory())
      watched.emplace("the device stream of " + function + " (its collectives)");
    DTC_RETURN_IF_ERROR(backend_->synchronize());
  }
  for (uint32_t index : prepared.downloads)
    DTC_RETURN_IF_ERROR(backend_->download(prepared.hostCopies.at(index).get(),
                                           deviceView(function, index).data, bytesOf(index)));
  if (timing_) functionTimings_.push_back({prepared.index, call, runStartUs, nowUs()});
  return Status::Ok();
}

}  // namespace dtc
