// A model file (.dtm) in memory, verified before use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/Support/Error.h"

#include "model/model_version.h"
#include "model_generated.h"

namespace dtc {

class ModelFile {
 public:
  // Reads `path` and checks the identifier, the FlatBuffers structure and the version.
  static llvm::Expected<ModelFile> read(const std::string& path);
  // Same for bytes already in memory; `name` appears in error messages.
  static llvm::Expected<ModelFile> fromBytes(std::vector<uint8_t> bytes, const std::string& name);

  const model::Model& model() const { return *model::GetModel(bytes_.data()); }
  const std::string& name() const { return name_; }

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
};

// Writes bytes to `path` through a temporary file and a rename, so a reader never sees half a file.
llvm::Error writeFileAtomically(const std::string& path, const uint8_t* data, size_t size);

}  // namespace dtc
