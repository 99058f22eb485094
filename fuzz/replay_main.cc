// Runs a fuzz target's entry point once on each input file (directories: each regular file in
// them, in name order), without libFuzzer, so ctest replays the seed corpora and the inputs
// that once broke a loader in any build.
//
//   replay [--valid] PATH... [--any PATH...]
//
// Inputs after --valid (the default) must also be accepted (the plan loads, the model imports):
// seeds a format change has made stale would otherwise fuzz nothing but the first checks.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Counts the inputs the target accepted; defined next to its entry point.
extern "C" size_t dtcFuzzAccepted;

namespace {

namespace fs = std::filesystem;

bool collect(const char* arg, bool valid, std::vector<std::pair<fs::path, bool>>& inputs) {
  fs::path path = arg;
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const fs::directory_entry& e : fs::directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path());
  } else if (fs::is_regular_file(path)) {
    files.push_back(path);
  } else {
    std::fprintf(stderr, "%s: no such file or directory\n", arg);
    return false;
  }
  std::sort(files.begin(), files.end());
  for (fs::path& f : files) inputs.emplace_back(std::move(f), valid);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<fs::path, bool>> inputs;
  bool valid = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--valid") == 0)
      valid = true;
    else if (std::strcmp(argv[i], "--any") == 0)
      valid = false;
    else if (!collect(argv[i], valid, inputs))
      return 2;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s [--valid] PATH... [--any PATH...]: no inputs found\n", argv[0]);
    return 2;
  }
  int rejected = 0;
  for (const auto& [path, mustLoad] : inputs) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    // An allocation of exactly the file's size, so a read past its end is a sanitizer report.
    std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), exact.get());
    const size_t before = dtcFuzzAccepted;
    LLVMFuzzerTestOneInput(exact.get(), bytes.size());
    if (mustLoad && dtcFuzzAccepted == before) {
      std::fprintf(stderr, "%s: rejected, but it is a seed (scripts/fuzz.sh --make-seeds)\n",
                   path.c_str());
      ++rejected;
    }
  }
  std::printf("%zu inputs ran, %zu accepted\n", inputs.size(), dtcFuzzAccepted);
  return rejected ? 1 : 0;
}
