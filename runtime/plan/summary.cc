#include "plan/summary.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "plan/communication.h"

namespace dtc {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

std::string jsonShape(const flatbuffers::Vector<int64_t>* shape) {
  std::string s = "[";
  if (shape)
    for (size_t i = 0; i < shape->size(); ++i) s += (i ? "," : "") + std::to_string(shape->Get(i));
  return s + "]";
}

const char* initName(plan::InitKind k) { return plan::EnumNameInitKind(k); }

struct FunctionStats {
  std::map<std::string, int> ops;
  int arenaBuffers = 0;
  uint64_t naiveArenaBytes = 0;  // every arena value in its own buffer: what reuse saves
};

FunctionStats stats(const plan::Function& f) {
  FunctionStats s;
  if (f.steps())
    for (const plan::Step* step : *f.steps()) s.ops[step->op()->str()]++;
  if (f.values())
    for (const plan::Value* v : *f.values())
      if (v->region() == plan::Region::arena) {
        ++s.arenaBuffers;
        s.naiveArenaBytes += (valueBytes(*v) + 63) / 64 * 64;
      }
  return s;
}

// Bytes of this rank's state tensors in `role` (trainable ones only if `trainable`).
uint64_t bytesOf(const Plan& plan, plan::Role role, bool trainable) {
  uint64_t n = 0;
  for (const plan::StateTensor* s : *plan.root().state())
    if (s->role() == role && (!trainable || s->trainable()))
      n += numElements(s->shape()) * dtypeSize(toDType(s->dtype()));
  return n;
}

}  // namespace

std::string summarizePlanText(const Plan& plan) {
  const plan::Plan& p = plan.root();
  std::ostringstream os;
  os << "plan " << plan.name() << " (format v" << p.version() << ", by "
     << (p.producer() ? p.producer()->str() : "?") << ")\n";
  os << "batch size " << p.batch_size();
  if (p.micro_batches() > 1)
    os << " x " << p.micro_batches() << " micro-batches per step (" << p.batch_size() * p.micro_batches()
       << " samples)";
  os << "; optimizer: "
     << (p.optimizer() ? p.optimizer()->str() : "") << "\n";
  uint64_t paramCount = 0, paramBytes = 0, stateBytes = 0;
  int params = 0, trainable = 0, slots = 0;
  for (const plan::StateTensor* s : *p.state()) {
    uint64_t bytes = numElements(s->shape()) * dtypeSize(toDType(s->dtype()));
    if (s->role() == plan::Role::param) {
      ++params;
      trainable += s->trainable();
      paramCount += numElements(s->shape());
      paramBytes += bytes;
    } else {
      ++slots;
      stateBytes += bytes;
    }
  }
  os << "parameters: " << params << " tensors (" << trainable << " trainable), " << paramCount
     << " values, " << paramBytes << " bytes\n";
  os << "optimizer state: " << slots << " tensors, " << stateBytes << " bytes\n";
  std::string mesh = meshText(plan);
  if (!mesh.empty())
    os << "mesh: " << mesh << " (" << meshDevices(plan)
       << " devices; every rank runs this plan on its shards, so the sizes below are per rank)\n";
  os << "state region: " << p.state_bytes() << " bytes; arena peak (largest function): "
     << plan.maxArenaBytes() << " bytes; total " << p.state_bytes() + plan.maxArenaBytes()
     << " bytes\n";
  if (const plan::Function* step = plan.function("train_step")) {
    // What one rank holds while training: gradients are as large as the trainable parameters
    // (they live in the arena, with the activations and temporaries).
    uint64_t gradBytes = 0;
    for (const plan::StateTensor* s : *p.state())
      if (s->role() == plan::Role::param && s->trainable())
        gradBytes += numElements(s->shape()) * dtypeSize(toDType(s->dtype()));
    os << "per rank, training: parameters " << paramBytes << " bytes, gradients " << gradBytes
       << " bytes, optimizer state " << stateBytes << " bytes, arena (activations, gradients, "
       << "temporaries) peak " << step->arena_bytes() << " bytes\n";
    std::map<std::pair<std::string, std::string>, std::pair<int, double>> byKind;
    for (const CollectiveCost& c : collectivesOf(plan, *step)) {
      auto& entry = byKind[{c.op, c.axes}];
      ++entry.first;
      entry.second += c.sentBytes;
    }
    for (const auto& [key, value] : byKind)
      os << "per rank, per training step: " << key.first << " over " << key.second << ": "
         << value.first << " call(s), sends " << static_cast<uint64_t>(value.second + 0.5)
         << " bytes\n";
  }
  for (const plan::Function* f : *p.functions()) {
    FunctionStats s = stats(*f);
    os << "function " << f->name()->str() << ": " << (f->steps() ? f->steps()->size() : 0)
       << " steps, " << s.arenaBuffers << " arena buffers, peak " << f->arena_bytes()
       << " bytes (" << s.naiveArenaBytes << " without reuse)\n    ops:";
    for (auto& [op, n] : s.ops) os << " " << op << "=" << n;
    os << "\n";
    std::vector<CollectiveCost> comms = collectivesOf(plan, *f);
    if (comms.empty()) continue;
    double sent = 0;
    for (const CollectiveCost& c : comms) sent += c.sentBytes;
    os << "    communication per call, per rank: " << comms.size() << " collective(s), sends "
       << static_cast<uint64_t>(sent + 0.5) << " bytes (ring algorithms)\n";
    for (const CollectiveCost& c : comms)
      os << "      " << c.op << " over " << c.axes << " (" << c.group << " ranks): " << c.bytes
         << " bytes in " << c.tensors << (c.tensors == 1 ? " tensor" : " tensors") << ", sends "
         << static_cast<uint64_t>(c.sentBytes + 0.5) << (c.loc.empty() ? "" : " [" + c.loc + "]")
         << "\n";
  }
  os << "parameters:\n";
  for (const plan::StateTensor* s : *p.state()) {
    if (s->role() != plan::Role::param) continue;
    os << "  " << s->name()->str() << " " << shapeString(s->shape()) << " "
       << dtypeName(toDType(s->dtype())) << (s->trainable() ? "" : " (frozen)") << " init "
       << initName(s->init());
    if (s->init() == plan::InitKind::uniform || s->init() == plan::InitKind::normal)
      os << "(" << s->init_a() << ", " << s->init_b() << ", seed " << s->init_seed() << ")";
    os << "\n";
  }
  return os.str();
}

std::string summarizePlanJson(const Plan& plan) {
  const plan::Plan& p = plan.root();
  std::ostringstream os;
  os << "{\"version\":" << p.version() << ",\"batch_size\":" << p.batch_size()
     << ",\"optimizer\":" << quote(p.optimizer() ? p.optimizer()->str() : "")
     << ",\"micro_batches\":" << p.micro_batches() << ",\"mesh\":" << quote(meshText(plan)) << ",\"devices\":" << meshDevices(plan)
     << ",\"state_bytes\":" << p.state_bytes() << ",\"arena_bytes\":" << plan.maxArenaBytes()
     << ",\"param_bytes\":" << bytesOf(plan, plan::Role::param, false)
     << ",\"grad_bytes\":" << bytesOf(plan, plan::Role::param, true)
     << ",\"optimizer_state_bytes\":" << bytesOf(plan, plan::Role::optim_state, false)
     << ",\"state\":[";
  bool first = true;
  for (const plan::StateTensor* s : *p.state()) {
    os << (first ? "" : ",") << "{\"name\":" << quote(s->name()->str())
       << ",\"role\":" << quote(plan::EnumNameRole(s->role())) << ",\"shape\":" << jsonShape(s->shape())
       << ",\"dtype\":" << quote(dtypeName(toDType(s->dtype())))
       << ",\"trainable\":" << (s->trainable() ? "true" : "false") << ",\"offset\":" << s->offset()
       << ",\"init\":" << quote(initName(s->init())) << "}";
    first = false;
  }
  os << "],\"functions\":[";
  first = true;
  for (const plan::Function* f : *p.functions()) {
    FunctionStats s = stats(*f);
    os << (first ? "" : ",") << "{\"name\":" << quote(f->name()->str())
       << ",\"arena_bytes\":" << f->arena_bytes() << ",\"arena_buffers\":" << s.arenaBuffers
       << ",\"naive_arena_bytes\":" << s.naiveArenaBytes
       << ",\"op_counts\":{";
    bool firstOp = true;
    for (auto& [op, n] : s.ops) os << (firstOp ? "" : ",") << quote(op) << ":" << n, firstOp = false;
    os << "},\"collectives\":[";
    bool firstComm = true;
    for (const CollectiveCost& c : collectivesOf(plan, *f)) {
      os << (firstComm ? "" : ",") << "{\"op\":" << quote(c.op) << ",\"axes\":" << quote(c.axes)
         << ",\"group\":" << c.group << ",\"tensors\":" << c.tensors << ",\"bytes\":" << c.bytes
         << ",\"sent_bytes\":" << static_cast<uint64_t>(c.sentBytes + 0.5) << "}";
      firstComm = false;
    }
    os << "],\"steps\":[";
    bool firstStep = true;
    if (f->steps())
      for (const plan::Step* step : *f->steps()) {
        os << (firstStep ? "" : ",") << "{\"op\":" << quote(step->op()->str())
           << ",\"loc\":" << quote(step->loc() ? step->loc()->str() : "") << ",\"outputs\":[";
        bool firstOut = true;
        for (uint32_t id : *step->outputs()) {
          const plan::Value* v = f->values()->Get(id);
          os << (firstOut ? "" : ",") << "{\"shape\":" << jsonShape(v->shape()) << ",\"region\":"
             << quote(plan::EnumNameRegion(v->region())) << ",\"offset\":" << v->offset() << "}";
          firstOut = false;
        }
        os << "]}";
        firstStep = false;
      }
    os << "]}";
    first = false;
  }
  os << "]}\n";
  return os.str();
}

}  // namespace dtc
