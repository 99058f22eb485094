// The DTC_* switches as support/runtime_options.def declares them: defaults, each kind's parse,
// the message for a value a switch does not take, and the help.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "support/runtime_options.h"

namespace dtc {
namespace {

StatusOr<RuntimeOptions> parse(const std::map<std::string, std::string>& env) {
  return parseRuntimeOptions([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(RuntimeOptions, DefaultsAsDeclared) {
  auto o = parse({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->collectives, RuntimeOptions::Collectives::kAuto);
  EXPECT_EQ(o->cudaAttention, RuntimeOptions::Attention::kAuto);
  EXPECT_EQ(o->snapshotCopy, RuntimeOptions::SnapshotCopy::kBackground);
  EXPECT_TRUE(o->cudaGraphs);
  EXPECT_FALSE(o->cudaTf32);
  EXPECT_TRUE(o->cudaBackend.empty());
  EXPECT_TRUE(o->faultPoint.empty());
}

TEST(RuntimeOptions, EachKindParses) {
  auto o = parse({{"DTC_COLLECTIVES", "mpi"},
                  {"DTC_CUDA_ATTENTION", "flash"},
                  {"DTC_CUDA_GRAPHS", "0"},
                  {"DTC_CUDA_TF32", "1"},
                  {"DTC_NCCL_LIBRARY", "/opt/nccl.so"},
                  {"DTC_SNAPSHOT_COPY", "step"},
                  {"DTC_FAULT", "after-step@1#3:pause"}});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->collectives, RuntimeOptions::Collectives::kMpi);
  EXPECT_EQ(o->cudaAttention, RuntimeOptions::Attention::kFlash);
  EXPECT_FALSE(o->cudaGraphs);
  EXPECT_TRUE(o->cudaTf32);
  EXPECT_EQ(o->ncclLibrary, "/opt/nccl.so");
  EXPECT_EQ(o->snapshotCopy, RuntimeOptions::SnapshotCopy::kStep);
  EXPECT_EQ(o->faultPoint, "after-step");
  EXPECT_EQ(o->faultRank, 1);
  EXPECT_EQ(o->faultWhen, 3);
  EXPECT_TRUE(o->faultPauses);
}

TEST(RuntimeOptions, AValueASwitchDoesNotTakeIsNamed) {
  EXPECT_EQ(parse({{"DTC_COLLECTIVES", "gloo"}}).status().message(),
            "DTC_COLLECTIVES is 'gloo': expected mpi|nccl");
  EXPECT_EQ(parse({{"DTC_CUDA_GRAPHS", "yes"}}).status().message(),
            "DTC_CUDA_GRAPHS is 'yes': expected 0|1");
  EXPECT_EQ(parse({{"DTC_FAULT", "@2"}}).status().message(),
            "DTC_FAULT is '@2': expected POINT[@RANK][#N][:throw|:pause]");
}

TEST(RuntimeOptions, HelpListsEverySwitchOnce) {
  const std::string help = runtimeOptionsHelp();
  for (const char* name : {"DTC_CUDA_BACKEND=PATH", "DTC_COLLECTIVES=mpi|nccl",
                           "DTC_CUDA_ATTENTION=auto|cudnn|flash|gemm", "DTC_CUDA_GRAPHS=0|1",
                           "DTC_SNAPSHOT_COPY=background|step", "DTC_FAULT=POINT"}) {
    const size_t at = help.find(name);
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_EQ(help.find(name, at + 1), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace dtc
