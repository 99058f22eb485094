// Semantic verification of a plan, after the FlatBuffers verifier has checked its structure:
// every index, offset and size in range, every name the runtime dereferences present, and the
// bindings the trainer relies on well-formed. After this, nothing in the plan can make the
// runtime read or write outside its buffers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"
#include "planfile/plan.h"
#include "support/printable.h"

namespace dtc {
namespace {

// FlatBuffers 2.0's verifier checks that a vector's length is aligned, not its elements: a
// vector of 64-bit numbers at a 4-byte boundary passes it, and reading one is undefined.
bool aligned(const flatbuffers::Vector<int64_t>* v) {
  // An empty vector has no element to read (and FlatBuffers does not align its data).
  return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % alignof(int64_t) == 0;
}

// Shapes must be non-negative and small enough that byte counts cannot overflow.
bool sane(const flatbuffers::Vector<int64_t>* shape) {
  if (!shape) return true;
  if (shape->size() > 8 || !aligned(shape)) return false;
  const int64_t limit = int64_t(1) << 40;
  int64_t n = 1;
  for (int64_t d : *shape) {
    // Checked before multiplying: two dimensions under the limit can wrap a 64-bit product.
    if (d < 0 || d > limit || (d > 0 && n > limit / d)) return false;
    n *= d;
  }
  return true;
}

bool knownDType(plan::DType t) { return t >= plan::DType::MIN && t <= plan::DType::MAX; }

// Whether attribute `a` holds a value of `kind` in its field and nothing in the others.
bool holds(const plan::Attr& a, AttrKind kind) {
  const bool i = a.i() != 0, f = a.f() != 0.0, ints = a.ints() && a.ints()->size() != 0,
             s = a.s() && a.s()->size() != 0;
  switch (kind) {
    case AttrKind::kInt: return !f && !ints && !s;
    case AttrKind::kFloat: return !i && !ints && !s;
    case AttrKind::kInts:
    case AttrKind::kMeshAxes: return !i && !f && !s;
    case AttrKind::kString: return !i && !f && !ints;
  }
  return false;
}

// What is wrong with a step's kernel or attributes ("" if nothing): the kernel must be one this
// build knows, and its attributes the ones it declares, each in its declared field.
std::string kernelProblem(const plan::Step& s) {
  const KernelInfo* k = kernelInfo(s.kernel());
  if (!k) return "a step runs " + kernelName(s.kernel()) + ", which this dtrun does not know";
  if (s.attrs())
    for (const plan::Attr* a : *s.attrs()) {
      const KernelAttr* declared = k->attr(a->name()->string_view());
      if (!declared)
        return "step '" + std::string(k->name) + "' has attribute '" + a->name()->str() +
               "', which its kernel does not read";
      if (!holds(*a, declared->kind))
        return "attribute '" + std::string(declared->name) + "' of step '" + k->name +
               "' is not of its kind (" + attrKindName(declared->kind) + ")";
    }
  return "";
}

class PlanVerifier {
 public:
  PlanVerifier(const plan::Plan& p, const std::string& name) : p_(p), name_(name) {}

  Status run() {
    if (!p_.state() || !p_.functions() || p_.functions()->size() == 0)
      return bad("it lacks its state or functions");
    // A step takes batch_size samples per micro-batch (at least one micro-batch).
    const int64_t micro = std::max<int64_t>(1, p_.micro_batches());
    if (p_.batch_size() < 0 || p_.batch_size() > (int64_t(1) << 40) / micro)
      return bad("its batch size " + std::to_string(p_.batch_size()) + " x " +
                 std::to_string(micro) + " micro-batches is out of range");
    DTC_RETURN_IF_ERROR(verifyMesh());
    DTC_RETURN_IF_ERROR(verifyStages());
    DTC_RETURN_IF_ERROR(verifyState());
    for (const plan::Function* f : *p_.functions()) DTC_RETURN_IF_ERROR(verifyFunction(*f));
    return verifyLrSchedule();
  }

 private:
  // Names come from the file: whatever bytes they hold, the message stays one printable line.
  Status bad(std::string what) const {
    return Status::InvalidInput(name_ + " is invalid: " + printable(std::move(what)));
  }

  // A step that takes the learning rate needs the schedule that gives it (train/lr_schedule.h).
  Status verifyLrSchedule() {
    const plan::LrSchedule* s = p_.lr_schedule();
    if (!takesLearningRate_ && !s) return Status::Ok();
    if (!s) return bad("its step takes a learning rate, but it records no learning-rate schedule");
    const std::string kind = s->kind() ? s->kind()->str() : "";
    const std::string what = "its learning-rate schedule ";
    if (kind != "constant" && kind != "cosine" && kind != "linear")
      return bad(what + "is of unknown kind '" + kind + "'");
    if (!(s->lr() > 0) || !std::isfinite(s->lr()))
      return bad(what + "has a learning rate that is not positive");
    if (!(s->min_lr() >= 0 && s->min_lr() <= s->lr()))
      return bad(what + "has min_lr outside [0, lr]");
    if (s->warmup_steps() < 0) return bad(what + "has negative warmup steps");
    if (kind != "constant" && s->decay_steps() <= s->warmup_steps())
      return bad(what + "decays over no steps (decay_steps <= warmup_steps)");
    return Status::Ok();
  }

  Status verifyMesh() {
    if (!p_.mesh()) return Status::Ok();
    uint64_t devices = 1;
    for (const plan::MeshAxis* axis : *p_.mesh()) {
      if (axis->size() < 1 || axis->size() > 65536) return bad("a mesh axis has a bad size");
      devices *= static_cast<uint64_t>(axis->size());
      if (devices > 65536) return bad("the mesh has too many devices");
    }
    return Status::Ok();
  }

  // Pipeline stages: every stage in range, and names unique per stage (the runtime finds a
  // rank's function and state by name among those of its stage).
  Status verifyStages() {
    const int32_t axis = p_.pipeline_axis();
    const uint32_t meshRank = p_.mesh() ? p_.mesh()->size() : 0;
    if (axis < -1 || (axis >= 0 && static_cast<uint32_t>(axis) >= meshRank))
      return bad("its pipeline axis " + std::to_string(axis) + " is not an axis of the mesh");
    const int64_t stages = axis >= 0 ? p_.mesh()->Get(axis)->size() : 0;
    auto check = [&](const std::string& what, int32_t stage,
                     std::map<std::string, std::set<int32_t>>& seen) -> Status {
      if (stage < -1 || stage >= stages)
        return bad(what + " has stage " + std::to_string(stage) +
                   (stages ? ", outside the pipeline's " + std::to_string(stages) + " stages"
                           : " in a plan without a pipeline"));
      std::set<int32_t>& stagesOfName = seen[what];
      // A name held by every rank (-1) cannot also be some stage's.
      if (stagesOfName.count(stage) || (stage == -1 && !stagesOfName.empty()) ||
          stagesOfName.count(-1))
        return bad(what + " appears twice" +
                   (stage >= 0 ? " in stage " + std::to_string(stage) : std::string()));
      stagesOfName.insert(stage);
      return Status::Ok();
    };
    std::map<std::string, std::set<int32_t>> functions, state;
    for (const plan::Function* f : *p_.functions())
      DTC_RETURN_IF_ERROR(check("function '" + f->name()->str() + "'", f->stage(), functions));
    for (const plan::StateTensor* s : *p_.state())
      DTC_RETURN_IF_ERROR(check("state tensor '" + s->name()->str() + "'", s->stage(), state));
    return Status::Ok();
  }

  // How many parts `sharding` cuts dimension `dim` into (1 if absent); 0 if it is malformed:
  // an axis out of range or named twice.
  uint64_t parts(const flatbuffers::Vector<flatbuffers::Offset<plan::DimSharding>>* sharding,
                 uint32_t dim) const {
    if (!sharding || dim >= sharding->size()) return 1;
    uint64_t n = 1, meshRank = p_.mesh() ? p_.mesh()->size() : 0;
    std::vector<bool> seen(meshRank, false);
    const auto* axes = sharding->Get(dim)->axes();
    if (sharding->Get(dim)->blocks() < 1) return 0;
    if (!axes) return 1;
    for (int32_t a : *axes) {
      if (a < 0 || static_cast<uint64_t>(a) >= meshRank || seen[a]) return 0;
      seen[a] = true;
      n *= static_cast<uint64_t>(p_.mesh()->Get(a)->size());
    }
    return n;
  }

  using Sharding = flatbuffers::Vector<flatbuffers::Offset<plan::DimSharding>>;

  // The sharding of the state tensor `name` that ranks of `stage` hold.
  const Sharding* stateSharding(const std::string& name, int32_t stage) const {
    for (const plan::StateTensor* s : *p_.state())
      if (Plan::onStage(s->stage(), stage) && s->name()->str() == name) return s->sharding();
    return nullptr;
  }

  // Equal cuts per dimension (absent and empty lists are both "whole").
  static bool sameSharding(const Sharding* a, const Sharding* b) {
    size_t n = std::max(a ? a->size() : 0, b ? b->size() : 0);
    for (size_t d = 0; d < n; ++d) {
      auto axes = [&](const Sharding* s) {
        std::vector<int32_t> v;
        if (s && d < s->size() && s->Get(d)->axes())
          v.assign(s->Get(d)->axes()->begin(), s->Get(d)->axes()->end());
        return v;
      };
      if (axes(a) != axes(b)) return false;
    }
    return true;
  }

  Status verifyState() {
    uint64_t constants = p_.constants() ? p_.constants()->size() : 0;
    for (const plan::StateTensor* s : *p_.state()) {
      std::string what = "state tensor '" + s->name()->str() + "'";
      // Both shapes are checked before any byte count is taken of them.
      if (!knownDType(s->dtype()) || !sane(s->shape()) || !sane(s->global_shape()))
        return bad(what + " has a bad dtype or shape");
      if (s->init() > plan::InitKind::MAX || s->role() > plan::Role::MAX)
        return bad(what + " has an unknown init kind or role");
      uint64_t bytes = stateTensorBytes(*s);
      if (s->offset() > p_.state_bytes() || bytes > p_.state_bytes() - s->offset())
        return bad(what + " lies outside the state region");
      // Regions start page-aligned; kernels read elements in place.
      if (s->offset() % dtypeSize(toDType(s->dtype())) != 0)
        return bad(what + " is misaligned in the state region");
      uint64_t dataBytes = s->global_shape()
                               ? numElements(s->global_shape()) * dtypeSize(toDType(s->dtype()))
                               : bytes;
      if (s->init() == plan::InitKind::data &&
          (s->data_bytes() != dataBytes || s->data_offset() > constants ||
           s->data_bytes() > constants - s->data_offset()))
        return bad("the initial values of " + what + " lie outside the constants");
      if (s->global_shape() || s->sharding()) {
        // The local shape must be the global one cut by the sharding.
        const auto* global = s->global_shape();
        if (!global || !s->shape() || global->size() != s->shape()->size() || !sane(global) ||
            (s->sharding() && s->sharding()->size() != 0 &&
             s->sharding()->size() != global->size()))
          return bad(what + " has a malformed global shape or sharding");
        for (uint32_t d = 0; d < global->size(); ++d) {
          uint64_t n = parts(s->sharding(), d);
          int64_t blocks =
              s->sharding() && d < s->sharding()->size() ? s->sharding()->Get(d)->blocks() : 1;
          if (n == 0 || global->Get(d) % (n * blocks) != 0 ||
              static_cast<uint64_t>(global->Get(d)) / n !=
                  static_cast<uint64_t>(s->shape()->Get(d)))
            return bad(what + " is not its global shape cut by its sharding");
        }
        if (s->init() == plan::InitKind::data &&
            s->data_bytes() != numElements(global) * dtypeSize(toDType(s->dtype())))
          return bad("the initial values of " + what + " do not match its global shape");
      }
      DTC_RETURN_IF_ERROR(verifyExternal(*s, what));
    }
    return Status::Ok();
  }

  // A parameter's external tensors: slices within its first dimension, transposed only where
  // two dimensions are left to swap.
  Status verifyExternal(const plan::StateTensor& s, const std::string& what) {
    if (!s.external() || s.external()->size() == 0) return Status::Ok();
    if (s.role() != plan::Role::param) return bad(what + " has external tensors but no parameter");
    const auto* shape = s.global_shape() ? s.global_shape() : s.shape();
    const int64_t rank = shape ? static_cast<int64_t>(shape->size()) : 0;
    // Either one tensor for all of it, or one for each index of its first dimension.
    std::set<int64_t> indices;
    for (const plan::ExternalTensor* e : *s.external()) indices.insert(e->index());
    const bool whole = s.external()->size() == 1 && *indices.begin() == -1;
    if (!whole && (indices.count(-1) || indices.size() != s.external()->size() || rank == 0 ||
                   static_cast<int64_t>(indices.size()) != shape->Get(0)))
      return bad(what + ": its external tensors do not hold each row of its first dimension once");
    for (const plan::ExternalTensor* e : *s.external()) {
      if (!e->name() || e->name()->size() == 0)
        return bad(what + " has an unnamed external tensor");
      const bool sliced = e->index() >= 0;
      if (e->index() < -1 || (sliced && (rank == 0 || e->index() >= shape->Get(0))))
        return bad(what + ": external tensor '" + e->name()->str() +
                   "' is outside its first dimension");
      if (e->transposed() && rank - (sliced ? 1 : 0) < 2)
        return bad(what + ": external tensor '" + e->name()->str() +
                   "' has no two dimensions to swap");
    }
    return Status::Ok();
  }

  Status verifyFunction(const plan::Function& f) {
    std::string fn = "function '" + f.name()->str() + "'";
    if (!f.values() || !f.steps() || !f.arguments() || !f.results())
      return bad(fn + " lacks its values, steps or bindings");
    uint32_t numValues = f.values()->size();
    if (p_.workspace_bytes() > f.arena_bytes())
      return bad(fn + ": the GEMM workspace is larger than its arena");
    for (const plan::Value* v : *f.values()) {
      if (!knownDType(v->dtype()) || !sane(v->shape()) || v->region() > plan::Region::MAX)
        return bad(fn + ": a value has a bad dtype, shape or region");
      uint64_t limit = v->region() == plan::Region::state ? p_.state_bytes() : f.arena_bytes();
      uint64_t bytes = valueBytes(*v);
      if (v->offset() > limit || bytes > limit - v->offset())
        return bad(fn + ": value '" + (v->name() ? v->name()->str() : "") +
                   "' lies outside its region");
      if (v->offset() % dtypeSize(toDType(v->dtype())) != 0)
        return bad(fn + ": value '" + (v->name() ? v->name()->str() : "") +
                   "' is misaligned in its region");
    }
    auto inRange = [&](const flatbuffers::Vector<uint32_t>* ids) {
      if (!ids) return false;
      for (uint32_t id : *ids)
        if (id >= numValues) return false;
      return true;
    };
    for (const plan::Step* s : *f.steps()) {
      if (std::string why = kernelProblem(*s); !why.empty()) return bad(fn + ": " + why);
      const std::string kernel = kernelName(s->kernel());
      if (!inRange(s->inputs()) || !inRange(s->outputs()))
        return bad(fn + ": step '" + kernel + "' refers to a value that does not exist");
      if (s->scratch_offset() > f.arena_bytes() ||
          s->scratch_bytes() > f.arena_bytes() - s->scratch_offset() ||
          s->scratch_offset() % kScratchAlign != 0)
        return bad(fn + ": step '" + kernel + "' has its scratch outside the arena or misaligned");
      if (s->attrs())
        for (const plan::Attr* a : *s->attrs())
          if (!aligned(a->ints()))
            return bad(fn + ": step '" + kernel + "' has a misaligned attribute");
    }
    int losses = 0;
    for (const auto* bindings : {f.arguments(), f.results()})
      for (const plan::Binding* b : *bindings) {
        if (b->value() >= numValues || b->role() > plan::Role::MAX || !b->name())
          return bad(fn + ": a binding is malformed");
        const plan::Value& v = *f.values()->Get(b->value());
        if (b->sharding() && v.shape() && b->sharding()->size() != 0 &&
            b->sharding()->size() != v.shape()->size())
          return bad(fn + ": binding '" + b->name()->str() + "' has a malformed sharding");
        for (uint32_t d = 0; b->sharding() && d < b->sharding()->size(); ++d) {
          if (parts(b->sharding(), d) == 0)
            return bad(fn + ": binding '" + b->name()->str() + "' names a bad mesh axis");
          // A load-balanced sequence: a data input's, an even count of chunks of the whole.
          const int64_t chunks = b->sharding()->Get(d)->sequence_chunks();
          if (chunks != 0 && (b->role() != plan::Role::data || chunks < 0 || chunks % 2 != 0 ||
                              !v.shape() || d >= v.shape()->size() ||
                              (static_cast<uint64_t>(v.shape()->Get(d)) * parts(b->sharding(), d)) %
                                      static_cast<uint64_t>(chunks) !=
                                  0))
            return bad(fn + ": binding '" + b->name()->str() +
                       "' has a malformed load-balanced sequence");
        }
        if (b->role() == plan::Role::data &&
            (!v.shape() || v.shape()->size() == 0 || p_.batch_size() <= 0 ||
             static_cast<uint64_t>(v.shape()->Get(0)) * parts(b->sharding(), 0) !=
                 static_cast<uint64_t>(p_.batch_size()) ||
             v.region() != plan::Region::arena))
          return bad(fn + ": data input '" + b->name()->str() +
                     "' must be an arena tensor whose first dimension is its share of the batch");
        if ((b->role() == plan::Role::param || b->role() == plan::Role::optim_state) &&
            !sameSharding(b->sharding(), stateSharding(b->name()->str(), f.stage())))
          return bad(fn + ": '" + b->name()->str() +
                     "' is sharded unlike the state tensor it binds");
        const bool rng = b->role() == plan::Role::hyper && b->name()->str() == "rng";
        if (b->role() == plan::Role::hyper && !rng) {
          if (b->name()->str() != "lr")
            return bad(fn + " takes an unknown setting '" + b->name()->str() + "'");
          takesLearningRate_ = true;
        }
        if (rng && (v.dtype() != plan::DType::i64 || numElements(v.shape()) != 2 ||
                    v.region() != plan::Region::arena))
          return bad(fn + ": 'rng' must be an int64 [2] of the arena");
        if (((b->role() == plan::Role::hyper && !rng) || b->role() == plan::Role::metric) &&
            (v.dtype() != plan::DType::f32 || numElements(v.shape()) != 1 ||
             v.region() != plan::Region::arena))
          return bad(fn + ": '" + b->name()->str() + "' must be a float32 scalar of the arena");
        if (b->role() == plan::Role::loss) {
          ++losses;
          if (v.dtype() != plan::DType::f32 || numElements(v.shape()) != 1)
            return bad(fn + ": the loss must be a float32 scalar");
        }
      }
    if (losses > 1) return bad(fn + " has more than one loss");
    return Status::Ok();
  }

  const plan::Plan& p_;
  const std::string& name_;
  bool takesLearningRate_ = false;  // some function has the "lr" hyper-parameter binding
};

}  // namespace

Status Plan::verify() const {
  const plan::Plan& p = root();
  if (p.version() != kPlanVersion)
    return Status::InvalidInput(name_ + " has plan format version " + std::to_string(p.version()) +
                                "; this dtrun reads version " + std::to_string(kPlanVersion) +
                                " (recompile the model with this dtc)");
  return PlanVerifier(p, name_).run();
}

}  // namespace dtc
