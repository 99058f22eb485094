// io::parseSafetensorsHeader on arbitrary headers (of checkpoint files, --init files and
// Hugging Face weights, from wherever a user got them). The input is the size of the data
// section (8 bytes, little-endian, at most 2^48) and the header's text. An error has a
// one-line message; a header that parses places every tensor inside the data section, with
// its bytes the product of its shape and dtype, the tensors tiling the section in order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t dataBytes = 0;
  for (int i = 7; i >= 0; --i) dataBytes = (dataBytes << 8) | data[i];
  dataBytes &= (uint64_t{1} << 48) - 1;
  const std::string_view header(reinterpret_cast<const char*>(data) + 8, size - 8);
  const uint64_t fileSize = 8 + header.size() + dataBytes;
  dtc::StatusOr<dtc::io::SafetensorsHeader> parsed =
      dtc::io::parseSafetensorsHeader(header, fileSize, "fuzz.safetensors");
  if (!parsed.ok()) {
    requireOneLine(parsed.status().message());
    return 0;
  }
  ++dtcFuzzAccepted;
  const dtc::io::SafetensorsHeader& h = parsed.value();
  require(h.dataStart == 8 + header.size());
  std::vector<const dtc::io::TensorEntry*> spans;
  for (const dtc::io::TensorEntry& t : h.entries) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      require(d >= 0);
      elements *= static_cast<uint64_t>(d);
    }
    require(t.bytes == elements * dtc::dtypeSize(t.dtype));
    require(t.begin <= dataBytes && t.bytes <= dataBytes - t.begin);
    require(h.find(t.name) == &t);
    spans.push_back(&t);
  }
  std::sort(spans.begin(), spans.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->bytes < b->bytes;
  });
  uint64_t covered = 0;
  for (const auto* t : spans) {
    require(t->begin == covered);
    covered += t->bytes;
  }
  require(covered == dataBytes);
  return 0;
}
