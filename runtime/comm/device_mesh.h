// The job's processes as a plan's device mesh: this rank's coordinates and one communicator
// per group of mesh axes (created on first use, in the same order on every rank because every
// rank binds the same plan).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dtc::comm {

class DeviceMesh {
 public:
  // `world` must have exactly as many ranks as the mesh has devices.
  static StatusOr<std::unique_ptr<DeviceMesh>> create(std::unique_ptr<Communicator> world,
                                                      std::vector<std::string> names,
                                                      std::vector<int64_t> sizes);

  int rank() const { return world_->rank(); }
  int numDevices() const { return world_->size(); }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // This device's coordinate on each axis (row-major rank order).
  const std::vector<int64_t>& coords() const { return coords_; }
  // Devices in a group over `axes`, and this device's index in it (coordinates on `axes`,
  // row-major in the order given).
  int64_t groupSize(const std::vector<int>& axes) const;
  int64_t indexIn(const std::vector<int>& axes) const;
  Communicator& world() { return *world_; }
  // The communicator of this device's group over `axes`. Creating one is collective over the
  // whole job (MPI_Comm_split): the first call for a list of axes must come on every rank, in
  // the same order.
  StatusOr<Communicator*> group(const std::vector<int>& axes);
  // Waits for the sends in flight on the world and on every group (Communicator::send).
  Status completeSends();

 private:
  DeviceMesh() = default;
  std::unique_ptr<Communicator> world_;
  std::vector<std::string> names_;
  std::vector<int64_t> sizes_, coords_;
  std::map<std::vector<int>, std::unique_ptr<Communicator>> groups_;
};

}  // namespace dtc::comm
