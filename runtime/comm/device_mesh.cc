#include "comm/device_mesh.h"

#include <algorithm>

namespace dtc::comm {

StatusOr<std::unique_ptr<DeviceMesh>> DeviceMesh::create(std::unique_ptr<Communicator> world,
                                                         std::vector<std::string> names,
                                                         std::vector<int64_t> sizes) {
  int64_t devices = 1;
  for (int64_t s : sizes) {
    if (s < 1) return Status::InvalidInput("mesh axis of size " + std::to_string(s));
    devices *= s;
  }
  if (devices != world->size())
    return Status::InvalidInput("the mesh has " + std::to_string(devices) + " devices, the job " +
                                std::to_string(world->size()) + " processes");
  std::unique_ptr<DeviceMesh> mesh(new DeviceMesh());
  mesh->names_ = std::move(names);
  mesh->sizes_ = std::move(sizes);
  mesh->coords_.assign(mesh->sizes_.size(), 0);
  int64_t rest = world->rank();
  for (int i = static_cast<int>(mesh->sizes_.size()) - 1; i >= 0; --i) {
    mesh->coords_[i] = rest % mesh->sizes_[i];
    rest /= mesh->sizes_[i];
  }
  mesh->world_ = std::move(world);
  return mesh;
}

int64_t DeviceMesh::groupSize(const std::vector<int>& axes) const {
  int64_t n = 1;
  for (int a : axes) n *= sizes_[a];
  return n;
}

int64_t DeviceMesh::indexIn(const std::vector<int>& axes) const {
  int64_t index = 0;
  for (int a : axes) index = index * sizes_[a] + coords_[a];
  return index;
}

StatusOr<Communicator*> DeviceMesh::group(const std::vector<int>& axes) {
  for (int a : axes)
    if (a < 0 || a >= static_cast<int>(sizes_.size()))
      return Status::InvalidInput("mesh has no axis " + std::to_string(a));
  auto it = groups_.find(axes);
  if (it != groups_.end()) return it->second.get();
  // Same color: same coordinates on every other axis.
  int64_t color = 0;
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<int>(i)) == axes.end())
      color = color * sizes_[i] + coords_[i];
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                       world_->split(static_cast<int>(color), static_cast<int>(indexIn(axes))));
  std::string label;
  for (int a : axes)
    label += (label.empty() ? "" : ",") + (static_cast<size_t>(a) < names_.size()
                                               ? names_[static_cast<size_t>(a)]
                                               : "axis " + std::to_string(a));
  comm->setLabel(label);
  Communicator* raw = comm.get();
  groups_[axes] = std::move(comm);
  return raw;
}

Status DeviceMesh::completeSends() {
  Status first = world_->completeSends();
  for (auto& entry : groups_) {
    Status s = entry.second->completeSends();
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace dtc::comm
