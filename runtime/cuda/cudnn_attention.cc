#include "cudnn_attention.h"

#include <map>
#include <mutex>
#include <vector>

#include "support/runtime_options.h"

#if DTC_HAVE_CUDNN_FRONTEND
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <dlfcn.h>

#include <cudnn_frontend.h>

// The loaded libcudnn, through which the frontend's dynamic loading resolves every cuDNN call.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace dtc::cuda {

SdpaLayout packedSdpaLayout(int64_t t, int64_t heads, int64_t d) {
  const int64_t c = heads * d;
  SdpaLayout l;
  l.q = l.kv = {t * 3 * c, d, 3 * c, 1};
  l.out = {t * c, d, c, 1};
  return l;
}

SdpaLayout headMajorSdpaLayout(int64_t t, int64_t heads, int64_t kvHeads, int64_t d) {
  SdpaLayout l;
  l.q = l.out = {heads * t * d, t * d, d, 1};
  l.kv = {kvHeads * t * d, t * d, d, 1};
  return l;
}

SdpaLayout sequenceMajorSdpaLayout(int64_t t, int64_t heads, int64_t kvHeads, int64_t d) {
  SdpaLayout l;
  l.q = l.out = {t * heads * d, d, heads * d, 1};
  l.kv = {t * kvHeads * d, d, kvHeads * d, 1};
  return l;
}

#if DTC_HAVE_CUDNN_FRONTEND
namespace {

namespace fe = cudnn_frontend;

struct Library {
  std::string unavailable, version;
};

// Loaded once per process, on first use.
const Library& library() {
  static const Library loaded = [] {
    Library l;
    const std::string& configured = runtimeOptions().cudnnLibrary;
    const std::string name = configured.empty() ? "libcudnn.so.9" : configured;
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* error = dlerror();
      l.unavailable = "cannot load " + name + (error ? std::string(": ") + error : "");
      return l;
    }
    using GetVersion = size_t (*)();
    auto getVersion = reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion"));
    if (!getVersion) {
      l.unavailable = name + " has no cudnnGetVersion";
      dlclose(handle);
      return l;
    }
    // cuDNN 9 numbers itself major·10000 + minor·100 + patch.
    const size_t v = getVersion();
    const std::string version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
                                "." + std::to_string(v % 100);
    if (v < 90000) {
      l.unavailable = name + " is cuDNN " + version + "; 9.0 or later is needed";
      dlclose(handle);
      return l;
    }
    fe::cudnn_dlhandle = handle;
    l.version = version;
    return l;
  }();
  return loaded;
}

// One cuDNN handle per GPU for the process, made on first use with the GPU current, never
// destroyed (bound steps hold it; see gemm_lt.cc's cuBLASLt handles).
StatusOr<cudnnHandle_t> handleFor(const Device& device) {
  static std::mutex mutex;
  static std::map<int, cudnnHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device.ordinal());
  if (it != handles.end()) return it->second;
  cudnnHandle_t handle = nullptr;
  if (fe::detail::create_handle(&handle) != CUDNN_STATUS_SUCCESS)
    return Status::Internal("creating a cuDNN handle on GPU " + std::to_string(device.ordinal()));
  handles.emplace(device.ordinal(), handle);
  return handle;
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

class Sdpa final : public CudnnSdpa {
 public:
  Sdpa(std::shared_ptr<fe::graph::Graph> graph, cudnnHandle_t handle, const SdpaSpec& spec,
       uint64_t workspace)
      : graph_(std::move(graph)), handle_(handle), spec_(spec), workspace_(workspace) {}

  uint64_t workspaceBytes() const override { return workspace_; }

  Status forward(cudaStream_t stream, const void* q, const void* k, const void* v, void* out,
                 float* lse, void* workspace, const std::string& where) const override {
    std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)},
                                               {kK, const_cast<void*>(k)},
                                               {kV, const_cast<void*>(v)},
                                               {kO, out},
                                               {kStats, lse}};
    return run(stream, pack, workspace, where);
  }

  Status backward(cudaStream_t stream, const void* dout, const void* q, const void* k,
                  const void* v, const void* out, const float* lse, void* dq, void* dk, void* dv,
                  void* workspace, const std::string& where) const override {
    std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)},
                                               {kK, const_cast<void*>(k)},
                                               {kV, const_cast<void*>(v)},
                                               {kO, const_cast<void*>(out)},
                                               {kDO, const_cast<void*>(dout)},
                                               {kStats, const_cast<float*>(lse)},
                                               {kDQ, dq},
                                               {kDK, dk},
                                               {kDV, dv}};
    return run(stream, pack, workspace, where);
  }

 private:
  Status run(cudaStream_t stream, std::unordered_map<int64_t, void*>& pack, void* workspace,
             const std::string& where) const {
    try {
      if (fe::detail::set_stream(handle_, stream) != CUDNN_STATUS_SUCCESS)
        return Status::Internal(where + "cudnnSetStream failed");
      fe::error_t done = graph_->execute(handle_, pack, workspace);
      if (done.is_bad()) return Status::Internal(where + "cuDNN attention: " + done.get_message());
    } catch (const std::exception& e) {
      return Status::Internal(where + "cuDNN attention: " + e.what());
    }
    return Status::Ok();
  }

  std::shared_ptr<fe::graph::Graph> graph_;
  cudnnHandle_t handle_;
  SdpaSpec spec_;
  uint64_t workspace_;
};

// The graph of `spec`, or the reason cuDNN refuses it.
std::shared_ptr<fe::graph::Graph> buildGraph(cudnnHandle_t handle, const SdpaSpec& spec,
                                             std::string& refused) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(spec.bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = spec.batch, h = spec.heads, t = spec.t, d = spec.d;
  const std::vector<int64_t> dims = {b, h, t, d}, kvDims = {b, spec.kvHeads, t, d};
  const auto strides = [](const std::array<int64_t, 4>& s) {
    return std::vector<int64_t>(s.begin(), s.end());
  };
  const std::vector<int64_t> qStride = strides(spec.layout.q), kvStride = strides(spec.layout.kv),
                             outStride = strides(spec.layout.out);
  auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& dim,
                    const std::vector<int64_t>& stride) {
    return graph->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_dim(dim).set_stride(stride).set_uid(uid));
  };
  auto q = tensor("q", kQ, dims, qStride), k = tensor("k", kK, kvDims, kvStride),
       v = tensor("v", kV, kvDims, kvStride);
  const std::vector<int64_t> statsDims = {b, h, t, 1}, statsStride = {h * t, t, 1, 1};
  if (!spec.grad) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_generate_stats(true)
                       .set_causal_mask(true)
                       .set_attn_scale(spec.scale);
    auto [o, stats] = graph->sdpa(q, k, v, options);
    o->set_output(true).set_dim(dims).set_stride(outStride).set_uid(kO);
    stats->set_output(true)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(statsDims)
        .set_stride(statsStride)
        .set_uid(kStats);
  } else {
    auto o = tensor("o", kO, dims, outStride), dO = tensor("dO", kDO, dims, outStride);
    auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                   .set_name("stats")
                                   .set_dim(statsDims)
                                   .set_stride(statsStride)
                                   .set_uid(kStats)
                                   .set_data_type(fe::DataType_t::FLOAT));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_grad")
                       .set_causal_mask(true)
                       .set_attn_scale(spec.scale)
                       .set_deterministic_algorithm(spec.deterministic);
    auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dO, stats, options);
    dq->set_output(true).set_dim(dims).set_stride(qStride).set_uid(kDQ);
    dk->set_output(true).set_dim(kvDims).set_stride(kvStride).set_uid(kDK);
    dv->set_output(true).set_dim(kvDims).set_stride(kvStride).set_uid(kDV);
  }
  // Each stage only after the one before succeeded; building the plans compiles the kernels.
  fe::error_t status = graph->validate();
  if (status.is_good()) status = graph->build_operation_graph(handle);
  if (status.is_good()) status = graph->create_execution_plans({fe::HeurMode_t::A});
  if (status.is_good()) status = graph->check_support(handle);
  if (status.is_good()) status = graph->build_plans(handle);
  if (status.is_good()) return graph;
  refused = status.get_message();
  return nullptr;
}

}  // namespace

std::string cudnnUnavailable() { return library().unavailable; }
std::string cudnnVersion() { return library().version; }

StatusOr<std::shared_ptr<const CudnnSdpa>> planCudnnSdpa(Device& device, const SdpaSpec& spec,
                                                         const std::string& where,
                                                         std::string& refused) {
  refused = cudnnUnavailable();
  if (!refused.empty()) return std::shared_ptr<const CudnnSdpa>();
  // The layers of a model share a few specs: each is built once (cuDNN's compile is the slow
  // part), a refusal remembered as well.
  struct Built {
    std::shared_ptr<const CudnnSdpa> plan;
    std::string refused;
  };
  static std::mutex mutex;
  static std::map<std::pair<int, SdpaSpec>, Built> built;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device.ordinal(), spec);
  if (auto it = built.find(key); it != built.end()) {
    refused = it->second.refused;
    return it->second.plan;
  }
  DTC_ASSIGN_OR_RETURN(cudnnHandle_t handle, handleFor(device));
  Built b;
  try {
    std::shared_ptr<fe::graph::Graph> graph = buildGraph(handle, spec, b.refused);
    if (graph) {
      int64_t workspace = 0;
      if (graph->get_workspace_size(workspace).is_bad() || workspace < 0)
        return Status::Internal(where + "cuDNN attention: no workspace size");
      b.plan = std::make_shared<Sdpa>(graph, handle, spec, static_cast<uint64_t>(workspace));
    }
  } catch (const std::exception& e) {
    // The frontend's dynamic loading throws where a symbol is missing: no cuDNN path then.
    b.refused = e.what();
    b.plan.reset();
  }
  refused = b.refused;
  built.emplace(key, b);
  return b.plan;
}

#else  // built without the frontend's headers

std::string cudnnUnavailable() {
  return "this plugin was built without the cuDNN frontend's headers (scripts/setup.sh fetches "
         "them)";
}
std::string cudnnVersion() { return ""; }

StatusOr<std::shared_ptr<const CudnnSdpa>> planCudnnSdpa(Device&, const SdpaSpec&,
                                                         const std::string&, std::string& refused) {
  refused = cudnnUnavailable();
  return std::shared_ptr<const CudnnSdpa>();
}

#endif

}  // namespace dtc::cuda
