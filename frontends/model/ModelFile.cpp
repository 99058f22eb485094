#include "model/ModelFile.h"

#include <sys/stat.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace dtc {
namespace {

// FlatBuffers 2.0's verifier checks that a vector's length is aligned, not its elements: a
// [long] or [double] at a 4-byte boundary passes it, and reading one is undefined.
template <typename T>
bool aligned(const flatbuffers::Vector<T>* v) {
  // An empty vector has no element to read (and FlatBuffers does not align its data).
  return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

bool vectorsAligned(const model::Graph& graph) {
  auto infoAligned = [](const model::TensorInfo* info) { return !info || aligned(info->shape()); };
  if (graph.inputs())
    for (const model::TensorInfo* info : *graph.inputs())
      if (!infoAligned(info)) return false;
  if (graph.initializers())
    for (const model::Initializer* init : *graph.initializers())
      if (!infoAligned(init->info()) || !aligned(init->float_data())) return false;
  if (graph.nodes())
    for (const model::Node* node : *graph.nodes())
      if (node->attributes())
        for (const model::Attribute* a : *node->attributes())
          if (!aligned(a->ints()) || !aligned(a->floats())) return false;
  return true;
}

}  // namespace

llvm::Expected<ModelFile> ModelFile::read(const std::string& path) {
  // A folder opens as a stream that fails (or throws) on its first read.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    return llvm::createStringError(path + " is a folder, not a model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return llvm::createStringError("cannot open model file " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  return fromBytes(std::move(bytes), path);
}

llvm::Expected<ModelFile> ModelFile::fromBytes(std::vector<uint8_t> bytes,
                                               const std::string& name) {
  if (bytes.size() < 8 || !model::ModelBufferHasIdentifier(bytes.data()))
    return llvm::createStringError(name + " is not a dtc model file (identifier 'DTCM' missing)");
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!model::VerifyModelBuffer(verifier))
    return llvm::createStringError(name + " is corrupt (FlatBuffers verification failed)");
  const model::Model* m = model::GetModel(bytes.data());
  if (!vectorsAligned(*m->graph()))
    return llvm::createStringError(name + " is corrupt (a vector of numbers is misaligned)");
  if (m->version() != kModelVersion)
    return llvm::createStringError(name + " has model format version " +
                                   std::to_string(m->version()) + "; this dtc reads version " +
                                   std::to_string(kModelVersion));
  ModelFile file;
  file.bytes_ = std::move(bytes);
  file.name_ = name;
  return file;
}

llvm::Error writeFileAtomically(const std::string& path, const uint8_t* data, size_t size) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return llvm::createStringError("cannot write " + path);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return llvm::createStringError("failed writing " + path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return llvm::createStringError("cannot rename " + tmp + " to " + path);
  }
  return llvm::Error::success();
}

}  // namespace dtc
