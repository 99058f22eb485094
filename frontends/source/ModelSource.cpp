#include "source/ModelSource.h"

#include "llvm/Support/MemoryBuffer.h"

#include "io/files.h"
#include "onnx/OnnxModel.h"

namespace dtc {
namespace {

llvm::Error failure(const std::string& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

}  // namespace

bool isOnnxFile(const std::string& path) {
  if (io::isDirectory(path)) return false;
  auto buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return false;
  const auto* bytes = reinterpret_cast<const uint8_t*>((*buffer)->getBufferStart());
  return !onnx_import::isDtcModel(bytes, (*buffer)->getBufferSize());
}

llvm::Expected<ModelFile> readModelSource(const std::string& path,
                                          const onnx_import::TranslateOptions& onnx,
                                          const hf::FolderOptions& folder, std::string* described) {
  const bool onnxOptions = !onnx.loss.empty() || !onnx.target.empty() || onnx.acceptEvalExport ||
                           !onnx.buffers.empty() || !onnx.paddingIdx.empty();
  if (io::isDirectory(path)) {
    if (onnxOptions)
      return failure(path +
                     ": --loss, --target, --eval-export, --buffer and --padding-idx apply to "
                     "ONNX exports; a Hugging Face folder's config says its model");
    StatusOr<hf::FolderModel> model = hf::buildFolderModel(path, folder);
    if (!model.ok()) return failure(model.status().message());
    if (described) *described = model->summary;
    return ModelFile::fromBytes(std::move(model->bytes), path);
  }
  if (folder.ctx != 0)
    return failure(path +
                   ": --ctx sets the window of a model built from its Hugging Face "
                   "folder; a model file's window is its own");
  if (!isOnnxFile(path)) {
    if (!onnx.loss.empty() || !onnx.target.empty())
      return failure(path +
                     ": --loss and --target apply to ONNX models; a dtc model names its loss "
                     "itself");
    if (onnx.acceptEvalExport || !onnx.buffers.empty())
      return failure(path + ": --eval-export and --buffer apply to ONNX exports");
    return ModelFile::read(path);
  }
  llvm::Expected<onnx_import::OnnxModel> model = onnx_import::OnnxModel::read(path);
  if (!model) return model.takeError();
  std::vector<std::string> notes;
  llvm::Expected<std::vector<uint8_t>> bytes = onnx_import::translateOnnx(*model, onnx, &notes);
  if (!bytes) return bytes.takeError();
  if (described)
    for (const std::string& note : notes) *described += (described->empty() ? "" : "\n") + note;
  return ModelFile::fromBytes(std::move(bytes).get(), path);
}

}  // namespace dtc
