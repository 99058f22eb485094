// What every fuzz target shares: its abort on a violated property, the one-line check of an
// error message, and the count of accepted inputs that replay_main.cc reads. Included by one
// source file per fuzz binary (it defines symbols).
#pragma once

#include <cstddef>
#include <string>

namespace {

// A violated property of the loader: abort, so the fuzzer records the input.
[[maybe_unused]] void require(bool property) {
  if (!property) __builtin_trap();
}

// A refusal says why in one line.
[[maybe_unused]] void requireOneLine(const std::string& message) {
  require(!message.empty() && message.find('\n') == std::string::npos);
}

}  // namespace

// Inputs that loaded (replay_main.cc checks that every seed does).
extern "C" {
size_t dtcFuzzAccepted = 0;
}
