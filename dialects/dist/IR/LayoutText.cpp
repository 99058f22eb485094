#include "dist/IR/LayoutText.h"

#include "llvm/ADT/SmallVector.h"

namespace dtc::dist {
namespace {

llvm::Error failure(const std::string& why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

}  // namespace

llvm::Expected<std::vector<MeshAxisText>> parseMeshText(llvm::StringRef text) {
  std::vector<MeshAxisText> axes;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [name, size] = part.trim().split('=');
    int64_t n = 0;
    name = name.trim();
    if (name.empty() || size.trim().getAsInteger(10, n) || n < 1)
      return failure("mesh wants name=size[,name=size], got '" + text.str() + "'");
    for (const MeshAxisText& a : axes)
      if (a.name == name) return failure("mesh axis '" + name.str() + "' named twice");
    axes.push_back({name.str(), n});
  }
  return axes;
}

std::string meshText(const std::vector<MeshAxisText>& axes) {
  std::string text;
  for (const MeshAxisText& a : axes)
    text += (text.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return text;
}

llvm::Expected<ShardSpecText> parseShardSpec(llvm::StringRef item) {
  auto [pattern, dims] = item.trim().split('=');
  if (pattern.empty() || dims.empty())
    return failure("--shard wants PATTERN=SPEC, got '" + item.str() + "'");
  ShardSpecText spec{pattern.str(), {}};
  llvm::SmallVector<llvm::StringRef> perDim;
  dims.split(perDim, ',');
  for (llvm::StringRef d : perDim) {
    ShardDimText dim;
    d = d.trim();
    if (d != "-") {
      const size_t digits = d.find_first_not_of("0123456789");
      if (digits != 0 && digits != llvm::StringRef::npos && d[digits] == 'x') {
        d.take_front(digits).getAsInteger(10, dim.chunks);
        d = d.drop_front(digits + 1);
        if (dim.chunks < 1)
          return failure("--shard '" + item.trim().str() + "': chunks must be >= 1");
      }
      llvm::SmallVector<llvm::StringRef> axes;
      d.split(axes, '+');
      for (llvm::StringRef a : axes) dim.axes.push_back(a.trim().str());
    }
    spec.dims.push_back(std::move(dim));
  }
  return spec;
}

}  // namespace dtc::dist
