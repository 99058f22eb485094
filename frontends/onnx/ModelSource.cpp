#include "onnx/ModelSource.h"

#include "llvm/Support/MemoryBuffer.h"

#include "onnx/OnnxModel.h"

namespace dtc {

bool isOnnxFile(const std::string& path) {
  auto buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return false;
  const auto* bytes = reinterpret_cast<const uint8_t*>((*buffer)->getBufferStart());
  return !onnx_import::isDtcModel(bytes, (*buffer)->getBufferSize());
}

llvm::Expected<ModelFile> readModelSource(const std::string& path,
                                          const onnx_import::TranslateOptions& onnx) {
  if (!isOnnxFile(path)) {
    if (!onnx.loss.empty() || !onnx.target.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path +
                                         ": --loss and --target apply to ONNX models; a dtc "
                                         "model names its loss itself");
    if (onnx.acceptEvalExport || !onnx.buffers.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": --eval-export and --buffer apply to ONNX exports");
    return ModelFile::read(path);
  }
  llvm::Expected<onnx_import::OnnxModel> model = onnx_import::OnnxModel::read(path);
  if (!model) return model.takeError();
  llvm::Expected<std::vector<uint8_t>> bytes = onnx_import::translateOnnx(*model, onnx);
  if (!bytes) return bytes.takeError();
  return ModelFile::fromBytes(std::move(*bytes), path);
}

}  // namespace dtc
