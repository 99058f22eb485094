// checkpoint::parseIndex on arbitrary text (a checkpoint's index.json, from wherever a user got
// it): an error with a one-line message, or an index whose every box lies in its tensor, names a
// file it lists, and which writes back as an index that parses to the same tensors.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "checkpoint/index.h"

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  dtc::StatusOr<dtc::checkpoint::CheckpointIndex> parsed =
      dtc::checkpoint::parseIndex(text, "index.json");
  if (!parsed.ok()) {
    requireOneLine(parsed.status().message());
    return 0;
  }
  ++dtcFuzzAccepted;
  const dtc::checkpoint::CheckpointIndex& index = parsed.value();
  for (const dtc::checkpoint::TensorRecord& t : index.tensors) {
    require(index.find(t.name) != nullptr);
    for (const dtc::checkpoint::SliceRecord& s : t.slices) {
      require(s.file >= 0 && static_cast<size_t>(s.file) < index.files.size());
      require(s.box.offsets.size() == t.shape.size() && s.box.sizes.size() == t.shape.size());
      for (size_t d = 0; d < t.shape.size(); ++d)
        require(s.box.offsets[d] >= 0 && s.box.sizes[d] >= 0 &&
                s.box.offsets[d] + s.box.sizes[d] <= t.shape[d]);
    }
  }
  // What a writer would write of it parses again, to the same tensors.
  const std::string again = dtc::checkpoint::indexToJson(index).dump();
  dtc::StatusOr<dtc::checkpoint::CheckpointIndex> reparsed =
      dtc::checkpoint::parseIndex(again, "index.json");
  require(reparsed.ok() && reparsed->tensors.size() == index.tensors.size() &&
          reparsed->files.size() == index.files.size());
  return 0;
}
