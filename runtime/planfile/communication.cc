#include "planfile/communication.h"

#include <optional>
#include <vector>

#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"

namespace dtc {

std::string meshText(const Plan& plan) {
  std::string text;
  if (const auto* mesh = plan.root().mesh())
    for (const plan::MeshAxis* axis : *mesh)
      text += (text.empty() ? "" : ",") + axis->name()->str() + "=" + std::to_string(axis->size());
  return text;
}

int64_t meshDevices(const Plan& plan) {
  int64_t n = 1;
  if (const auto* mesh = plan.root().mesh())
    for (const plan::MeshAxis* axis : *mesh) n *= axis->size();
  return n;
}

std::vector<int64_t> meshSizes(const Plan& plan) {
  std::vector<int64_t> sizes;
  if (const auto* mesh = plan.root().mesh())
    for (const plan::MeshAxis* axis : *mesh) sizes.push_back(axis->size());
  return sizes;
}

std::optional<CollectiveCost> collectiveCost(const Plan& plan, const plan::Function& f,
                                             const plan::Step& s) {
  static const Kernel kCollectives[] = {
      Kernel::all_reduce,           Kernel::all_gather, Kernel::reduce_scatter, Kernel::all_to_all,
      Kernel::collective_broadcast, Kernel::send,       Kernel::recv,           Kernel::ring_shift};
  const auto* mesh = plan.root().mesh();
  const Kernel op = s.kernel();
  bool collective = false;
  for (Kernel c : kCollectives) collective |= op == c;
  if (!mesh || !collective) return std::nullopt;
  CollectiveCost c;
  c.op = kernelName(op);
  c.loc = s.loc() ? s.loc()->str() : "";
  if (const plan::Attr* a = findStepAttr(s, "reduction"); a && a->s() && a->s()->str() == "max")
    c.op += "(max)";
  // Axes out of range or named twice are errors when the plan is bound (collectiveAxes); here
  // they are skipped, so the group stays within the mesh's devices.
  std::vector<bool> counted(mesh->size(), false);
  if (const plan::Attr* a = findStepAttr(s, "axes"); a && a->ints())
    for (int64_t axis : *a->ints()) {
      if (axis < 0 || axis >= static_cast<int64_t>(mesh->size()) || counted[axis]) continue;
      counted[axis] = true;
      c.axes += (c.axes.empty() ? "" : ",") + mesh->Get(axis)->name()->str();
      c.axisIndices.push_back(axis);
      c.group *= mesh->Get(axis)->size();
    }
  const auto* values = op == Kernel::recv ? s.outputs() : s.inputs();
  c.tensors = values ? static_cast<int>(values->size()) : 0;
  if (values)
    for (uint32_t id : *values) c.bytes += valueBytes(*f.values()->Get(id));
  double n = static_cast<double>(c.group), b = static_cast<double>(c.bytes);
  if (op == Kernel::all_reduce)
    c.sentBytes = 2 * (n - 1) / n * b;  // sum or max alike
  else if (op == Kernel::reduce_scatter || op == Kernel::all_to_all)
    c.sentBytes = (n - 1) / n * b;
  else if (op == Kernel::all_gather)
    c.sentBytes = (n - 1) * b;
  else if (op == Kernel::collective_broadcast || op == Kernel::send || op == Kernel::ring_shift)
    c.sentBytes = b;
  return c;
}

std::vector<CollectiveCost> collectivesOf(const Plan& plan, const plan::Function& f) {
  std::vector<CollectiveCost> out;
  if (f.steps())
    for (const plan::Step* step : *f.steps())
      if (std::optional<CollectiveCost> c = collectiveCost(plan, f, *step)) out.push_back(*c);
  return out;
}

bool nativeHalfCollective(plan::Kernel kernel, bool maxReduction,
                          const std::vector<int64_t>& wholeShape, int64_t dim) {
  switch (kernel) {
    case Kernel::all_reduce: return !maxReduction;
    case Kernel::reduce_scatter:
    case Kernel::all_gather: return outerOf(wholeShape, dim) <= 1;
    default: return false;
  }
}

}  // namespace dtc
