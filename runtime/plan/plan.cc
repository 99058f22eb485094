#include "plan/plan.h"

#include <fstream>
#include <iterator>

namespace dtc {

DType toDType(plan::DType t) { return static_cast<DType>(static_cast<int8_t>(t)); }

int64_t numElements(const flatbuffers::Vector<int64_t>* shape) {
  int64_t n = 1;
  if (shape)
    for (int64_t d : *shape) n *= d;
  return n;
}

std::string shapeString(const flatbuffers::Vector<int64_t>* shape) {
  std::string s = "[";
  if (shape)
    for (size_t i = 0; i < shape->size(); ++i) s += (i ? "," : "") + std::to_string(shape->Get(i));
  return s + "]";
}

uint64_t valueBytes(const plan::Value& v) {
  return static_cast<uint64_t>(numElements(v.shape())) * dtypeSize(toDType(v.dtype()));
}

StatusOr<Plan> Plan::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidInput("cannot open plan file " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fromBytes(std::move(bytes), path);
}

StatusOr<Plan> Plan::fromBytes(std::vector<uint8_t> bytes, const std::string& name) {
  Plan p;
  p.bytes_ = std::move(bytes);
  p.name_ = name;
  if (p.bytes_.size() < 8 || !plan::PlanBufferHasIdentifier(p.bytes_.data()))
    return Status::InvalidInput(name + " is not a dtc plan (identifier 'DTCP' missing)");
  flatbuffers::Verifier verifier(p.bytes_.data(), p.bytes_.size(), /*max_depth=*/64,
                                 /*max_tables=*/10000000, /*check_alignment=*/true);
  if (!plan::VerifyPlanBuffer(verifier))
    return Status::InvalidInput(name + " is corrupt (FlatBuffers verification failed)");
  DTC_RETURN_IF_ERROR(p.verify());
  return p;
}

const plan::Function* Plan::function(const std::string& name) const {
  if (const auto* fns = root().functions())
    for (const plan::Function* f : *fns)
      if (f->name()->str() == name) return f;
  return nullptr;
}

uint64_t Plan::maxArenaBytes() const {
  uint64_t peak = 0;
  if (const auto* fns = root().functions())
    for (const plan::Function* f : *fns) peak = std::max(peak, f->arena_bytes());
  return peak;
}

namespace {

// Shapes must be non-negative and small enough that byte counts cannot overflow.
bool sane(const flatbuffers::Vector<int64_t>* shape) {
  if (!shape) return true;
  if (shape->size() > 8) return false;
  uint64_t n = 1;
  for (int64_t d : *shape) {
    if (d < 0 || d > (int64_t(1) << 40)) return false;
    n *= static_cast<uint64_t>(d);
    if (n > (uint64_t(1) << 40)) return false;
  }
  return true;
}

bool knownDType(plan::DType t) {
  return t >= plan::DType::MIN && t <= plan::DType::MAX;
}

}  // namespace

Status Plan::verify() const {
  const plan::Plan& p = root();
  auto bad = [&](const std::string& what) {
    return Status::InvalidInput(name_ + " is invalid: " + what);
  };
  if (p.version() != kPlanVersion)
    return Status::InvalidInput(name_ + " has plan format version " + std::to_string(p.version()) +
                                "; this dtrun reads version " + std::to_string(kPlanVersion) +
                                " (recompile the model with this dtc)");
  uint64_t constants = p.constants() ? p.constants()->size() : 0;
  if (p.state())
    for (const plan::StateTensor* s : *p.state()) {
      if (!knownDType(s->dtype()) || !sane(s->shape()))
        return bad("state tensor '" + s->name()->str() + "' has a bad dtype or shape");
      uint64_t bytes = numElements(s->shape()) * dtypeSize(toDType(s->dtype()));
      if (s->offset() > p.state_bytes() || bytes > p.state_bytes() - s->offset())
        return bad("state tensor '" + s->name()->str() + "' lies outside the state region");
      if (s->init() == plan::InitKind::data &&
          (s->data_bytes() != bytes || s->data_offset() > constants ||
           s->data_bytes() > constants - s->data_offset()))
        return bad("initial values of '" + s->name()->str() + "' lie outside the constants");
      if (s->init() > plan::InitKind::MAX) return bad("unknown init kind");
    }
  if (!p.functions() || p.functions()->size() == 0) return bad("it has no functions");
  for (const plan::Function* f : *p.functions()) {
    std::string fn = "function '" + f->name()->str() + "'";
    uint32_t numValues = f->values() ? f->values()->size() : 0;
    if (f->values())
      for (const plan::Value* v : *f->values()) {
        if (!knownDType(v->dtype()) || !sane(v->shape()))
          return bad(fn + ": value has a bad dtype or shape");
        uint64_t limit = v->region() == plan::Region::state ? p.state_bytes() : f->arena_bytes();
        if (v->region() > plan::Region::MAX) return bad(fn + ": unknown region");
        uint64_t bytes = valueBytes(*v);
        if (v->offset() > limit || bytes > limit - v->offset())
          return bad(fn + ": value '" + (v->name() ? v->name()->str() : "") +
                     "' lies outside its region");
      }
    auto checkIndices = [&](const flatbuffers::Vector<uint32_t>* ids) {
      if (ids)
        for (uint32_t id : *ids)
          if (id >= numValues) return false;
      return true;
    };
    if (f->steps())
      for (const plan::Step* s : *f->steps())
        if (!checkIndices(s->inputs()) || !checkIndices(s->outputs()))
          return bad(fn + ": step '" + s->op()->str() + "' refers to a value that does not exist");
    for (const auto* bindings : {f->arguments(), f->results()})
      if (bindings)
        for (const plan::Binding* b : *bindings)
          if (b->value() >= numValues || b->role() > plan::Role::MAX)
            return bad(fn + ": a binding refers to a value that does not exist");
  }
  return Status::Ok();
}

}  // namespace dtc
