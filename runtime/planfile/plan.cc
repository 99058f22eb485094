#include "planfile/plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "io/crc32.h"

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

uint64_t stateTensorBytes(const plan::StateTensor& s) {
  return static_cast<uint64_t>(numElements(s.shape())) * dtypeSize(toDType(s.dtype()));
}

const plan::Attr* findStepAttr(const plan::Step& step, const char* name) {
  if (step.attrs())
    for (const plan::Attr* a : *step.attrs())
      if (a->name()->str() == name) return a;
  return nullptr;
}

StatusOr<Plan> Plan::load(const std::string& path) {
  // A folder opens as a stream that throws on its first read.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    return Status::InvalidInput(path + " is a folder, not a plan file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidInput("cannot open plan file " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  return fromFileBytes(std::move(bytes), path);
}

StatusOr<Plan> Plan::fromFileBytes(std::vector<uint8_t> bytes, const std::string& name) {
  DTC_RETURN_IF_ERROR(checkFooter(bytes, name));
  bytes.resize(bytes.size() - kPlanFooterBytes);
  return fromBytes(std::move(bytes), name);
}

Status Plan::checkFooter(const std::vector<uint8_t>& bytes, const std::string& name) {
  const bool isPlan = bytes.size() >= 8 && plan::PlanBufferHasIdentifier(bytes.data());
  if (!isPlan) return Status::InvalidInput(name + " is not a dtc plan (identifier 'DTCP' missing)");
  PlanFooter footer;
  if (bytes.size() < 8 + kPlanFooterBytes || !readPlanFooter(bytes, footer))
    return Status::InvalidInput(
        name +
        " is truncated, or was written by an older dtc (its checksum footer is "
        "missing; recompile the model with this dtc)");
  const uint32_t recorded = footer.crc;
  const uint64_t length = footer.length;
  if (length != bytes.size() - kPlanFooterBytes)
    return Status::InvalidInput(name + " is corrupt: it holds " +
                                std::to_string(bytes.size() - kPlanFooterBytes) +
                                " bytes of plan, its footer says " + std::to_string(length));
  const uint32_t actual = io::crc32(0, bytes.data(), static_cast<size_t>(length));
  if (actual != recorded) {
    char text[96];
    std::snprintf(text, sizeof text, " (crc32 %08x, recorded %08x)", actual, recorded);
    return Status::InvalidInput(name + " is corrupt: its checksum does not match its contents" +
                                text);
  }
  return Status::Ok();
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

int64_t Plan::stages() const {
  const int axis = root().pipeline_axis();
  const auto* mesh = root().mesh();
  if (axis < 0 || !mesh || static_cast<uint32_t>(axis) >= mesh->size()) return 0;
  return mesh->Get(axis)->size();
}

const plan::Function* Plan::function(const std::string& name, int stage) const {
  if (const auto* fns = root().functions())
    for (const plan::Function* f : *fns)
      if (onStage(f->stage(), stage) && f->name()->str() == name) return f;
  return nullptr;
}

const plan::StateTensor* Plan::stateTensor(const std::string& name, int stage) const {
  if (const auto* state = root().state())
    for (const plan::StateTensor* s : *state)
      if (onStage(s->stage(), stage) && s->name()->str() == name) return s;
  return nullptr;
}

uint64_t Plan::maxArenaBytes(int stage) const {
  uint64_t peak = 0;
  if (const auto* fns = root().functions())
    for (const plan::Function* f : *fns)
      if (onStage(f->stage(), stage)) peak = std::max(peak, f->arena_bytes());
  return peak;
}

}  // namespace dtc
