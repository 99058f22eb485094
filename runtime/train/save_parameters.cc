#include "train/save_parameters.h"

#include "exec/shard_layout.h"
#include "io/files.h"
#include "io/safetensors.h"

namespace dtc {
namespace {

// The world rank of stage `stage`'s first device (every other mesh coordinate 0).
int stageLeadRank(const comm::DeviceMesh& mesh, int axis, int stage) {
  int64_t stride = 1;
  for (size_t a = axis + 1; a < mesh.sizes().size(); ++a) stride *= mesh.sizes()[a];
  return static_cast<int>(stage * stride);
}

constexpr int kSaveTag = 1;  // parameters on their way to rank 0 (world communicator)

}  // namespace

// A pipeline's stages hold different parameters: each stage gathers its own, then its first
// device sends them to rank 0. Every rank walks the plan's state list in order, so the sends and
// receives pair up.
Status saveParameters(Executor& ex, const std::string& dir, bool write) {
  if (write) DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(dir, "--save"));
  const Plan& plan = ex.plan();
  comm::DeviceMesh* mesh = ex.mesh();
  const bool pipeline = plan.stages() > 0 && mesh;
  const int axis = plan.root().pipeline_axis();
  bool stageLead = pipeline && ex.stage() > 0;
  for (size_t a = 0; stageLead && a < mesh->coords().size(); ++a)
    stageLead = static_cast<int>(a) == axis || mesh->coords()[a] == 0;
  std::vector<io::TensorRef> tensors;
  std::vector<std::vector<float>> gathered;
  std::vector<std::vector<uint8_t>> received;
  gathered.reserve(plan.root().state()->size());
  received.reserve(plan.root().state()->size());
  for (const plan::StateTensor* s : *plan.root().state()) {
    if (s->role() != plan::Role::param || s->constant()) continue;
    if (!Plan::onStage(s->stage(), ex.stage())) {
      if (!write) continue;  // another stage's, and not ours to write
      // Whole, from the first device of the stage holding it.
      const auto* shape = s->global_shape() ? s->global_shape() : s->shape();
      std::vector<int64_t> dims(shape->begin(), shape->end());
      size_t bytes = static_cast<size_t>(numElements(shape)) * dtypeSize(toDType(s->dtype()));
      received.emplace_back(bytes);
      DTC_RETURN_IF_ERROR(mesh->world().recv(received.back().data(), static_cast<int64_t>(bytes),
                                             stageLeadRank(*mesh, axis, s->stage()), kSaveTag));
      tensors.push_back(
          {s->name()->str(), toDType(s->dtype()), dims, received.back().data(), bytes});
      if (s->aliases())
        for (const flatbuffers::String* alias : *s->aliases())
          tensors.push_back(
              {alias->str(), toDType(s->dtype()), dims, received.back().data(), bytes});
      continue;
    }
    TensorView t = ex.state(s->name()->str());
    std::vector<DimCut> cuts = cutsOf(s->sharding(), t.shape.size(), mesh);
    if (isSharded(cuts)) {
      if (t.dtype != DType::kF32)
        return Status::InvalidInput("--save: sharded parameter '" + s->name()->str() +
                                    "' is not float32");
      DTC_ASSIGN_OR_RETURN(std::vector<float> whole, gatherShards(t.f32(), t.shape, cuts, *mesh));
      gathered.push_back(std::move(whole));
      for (size_t d = 0; d < cuts.size(); ++d) t.shape[d] *= cuts[d].parts;
      t.data = reinterpret_cast<uint8_t*>(gathered.back().data());
    }
    const size_t bytes = static_cast<size_t>(t.numElements()) * dtypeSize(t.dtype);
    // A tensor every stage holds (stage -1) is rank 0's too.
    if (stageLead && s->stage() >= 0)
      DTC_RETURN_IF_ERROR(mesh->world().send(t.data, static_cast<int64_t>(bytes), 0, kSaveTag));
    tensors.push_back({s->name()->str(), t.dtype, t.shape, t.data, bytes});
    // A tied weight's other names hold the same values (a copy each in the file: safetensors
    // entries may not share bytes).
    if (s->aliases())
      for (const flatbuffers::String* alias : *s->aliases())
        tensors.push_back({alias->str(), t.dtype, t.shape, t.data, bytes});
  }
  if (mesh) DTC_RETURN_IF_ERROR(mesh->completeSends());
  if (!write) return Status::Ok();
  return io::writeSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace dtc
