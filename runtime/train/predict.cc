#include "train/predict.h"

#include <cctype>
#include <cstring>

#include "io/npy.h"

namespace dtc {

namespace {

// A file name for an output: ONNX names carry slashes ("/fc2/Gemm_output_0").
std::string fileNameOf(const std::string& output) {
  std::string name = output;
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return name;
}

}  // namespace

Status predict(Executor& ex, BatchSource& data, const std::string& dir) {
  const plan::Function& f = *ex.function("eval");
  struct Output {
    std::string name;
    uint32_t index;
    std::vector<uint8_t> bytes;
    TensorView view;
  };
  std::vector<Output> outputs;
  for (const plan::Binding* b : *f.results())
    if (b->role() == plan::Role::output || b->role() == plan::Role::loss)
      outputs.push_back({b->name()->str(), b->value(), {}, {}});
  const int64_t batches = data.evalBatches();
  if (batches == 0)
    return Status::InvalidInput("--predict: the data holds no full batch of " +
                                std::to_string(ex.plan().root().batch_size()) + " samples");
  for (int64_t b = 0; b < batches; ++b) {
    data.fillEval(b);
    DTC_RETURN_IF_ERROR(ex.run("eval"));
    for (Output& o : outputs) {
      o.view = ex.view("eval", o.index);
      const size_t bytes = static_cast<size_t>(o.view.numElements()) * dtypeSize(o.view.dtype);
      o.bytes.insert(o.bytes.end(), o.view.data, o.view.data + bytes);
    }
  }
  const int64_t batch = ex.plan().root().batch_size();
  for (const Output& o : outputs) {
    std::vector<int64_t> shape = o.view.shape;
    if (!shape.empty() && shape[0] == batch)
      shape[0] *= batches;
    else
      shape.insert(shape.begin(), batches);
    DTC_RETURN_IF_ERROR(
        io::writeNpy(dir + "/" + fileNameOf(o.name) + ".npy", o.view.dtype, shape, o.bytes.data()));
  }
  return Status::Ok();
}

}  // namespace dtc
