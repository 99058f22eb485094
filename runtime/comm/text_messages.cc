#include "comm/communicator.h"

namespace dtc::comm {

Status sendText(Communicator& comm, const std::string& text, int peer, int tag) {
  const uint64_t length = text.size();
  DTC_RETURN_IF_ERROR(comm.send(&length, sizeof length, peer, tag));
  DTC_RETURN_IF_ERROR(comm.send(text.data(), static_cast<int64_t>(length), peer, tag));
  return comm.completeSends();
}

StatusOr<std::string> recvText(Communicator& comm, int peer, int tag) {
  uint64_t length = 0;
  DTC_RETURN_IF_ERROR(comm.recv(&length, sizeof length, peer, tag));
  std::string text(length, '\0');
  DTC_RETURN_IF_ERROR(comm.recv(text.data(), static_cast<int64_t>(length), peer, tag));
  return text;
}

}  // namespace dtc::comm
