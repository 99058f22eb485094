#include "ops/kernel_registry.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace dtc {
namespace {

struct Registry {
  std::vector<KernelInfo> byCode;  // indexed by code; Kernel::none where no kernel has the code
  std::vector<const KernelInfo*> all;
  std::unordered_map<std::string_view, const KernelInfo*> byName;

  Registry() {
    uint16_t limit = 1;
#define DTC_KERNEL(name, code, types, family, contract) \
  limit = std::max<uint16_t>(limit, (code) + 1);
#include "ops/kernels.def"
    byCode.resize(limit);
    auto add = [&](uint16_t code, const char* name, KernelTypes types, KernelFamily family) {
      KernelInfo& k = byCode[code];
      k.kernel = static_cast<Kernel>(code);
      k.name = name;
      k.types = types;
      k.family = family;
    };
#define DTC_KERNEL(name, code, types, family, contract) \
  add(code, #name, KernelTypes::k##types, KernelFamily::k##family);
#include "ops/kernels.def"
#define DTC_KERNEL_ATTR(name, attribute, kind) \
  byCode[static_cast<uint16_t>(Kernel::name)].attrs.push_back({#attribute, AttrKind::k##kind});
#include "ops/kernels.def"
#define DTC_KERNEL_PRICED_AS(name, measured) \
  byCode[static_cast<uint16_t>(Kernel::name)].pricedAs = #measured;
#include "ops/kernels.def"
    for (const KernelInfo& k : byCode)
      if (k.kernel != Kernel::none) {
        all.push_back(&k);
        byName.emplace(k.name, &k);
      }
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

}  // namespace

const KernelAttr* KernelInfo::attr(std::string_view name) const {
  for (const KernelAttr& a : attrs)
    if (name == a.name) return &a;
  return nullptr;
}

const KernelInfo* kernelInfo(Kernel kernel) {
  const auto code = static_cast<uint16_t>(kernel);
  const Registry& r = registry();
  if (code >= r.byCode.size() || r.byCode[code].kernel == Kernel::none) return nullptr;
  return &r.byCode[code];
}

const KernelInfo* findKernel(std::string_view name) {
  const Registry& r = registry();
  auto it = r.byName.find(name);
  return it == r.byName.end() ? nullptr : it->second;
}

const std::vector<const KernelInfo*>& allKernels() { return registry().all; }

uint16_t kernelCodeLimit() { return static_cast<uint16_t>(registry().byCode.size()); }

std::string kernelName(Kernel kernel) {
  const KernelInfo* k = kernelInfo(kernel);
  return k ? k->name : "kernel " + std::to_string(static_cast<uint16_t>(kernel));
}

const char* attrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt: return "Int";
    case AttrKind::kFloat: return "Float";
    case AttrKind::kInts: return "Ints";
    case AttrKind::kMeshAxes: return "MeshAxes";
    case AttrKind::kString: return "String";
  }
  return "?";
}

}  // namespace dtc
