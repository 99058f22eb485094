// dtrun's flags: what train/train_flags.def generates, checked on command lines as a user types
// them.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "train/train_flags.h"

namespace dtc {
namespace {

// Parses `line` (words after `dtrun`) into `options`.
Status parse(const std::vector<std::string>& line, TrainOptions& options,
             std::vector<std::string>* positionals = nullptr) {
  std::vector<std::string> words = {"dtrun"};
  words.insert(words.end(), line.begin(), line.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  std::vector<std::string> rest;
  return parseTrainFlags(static_cast<int>(argv.size()), argv.data(), 1, options,
                         positionals ? *positionals : rest);
}

std::string error(const std::vector<std::string>& line) {
  TrainOptions options;
  Status s = parse(line, options);
  return s.ok() ? "" : s.message();
}

TEST(TrainFlags, GroupsHoldWhatIsGiven) {
  TrainOptions o;
  std::vector<std::string> positionals;
  ASSERT_TRUE(parse({"m.dtp",
                     "--data",
                     "d",
                     "--steps",
                     "30",
                     "--checkpoint",
                     "ck",
                     "--keep",
                     "2",
                     "--checkpoint-async",
                     "--save",
                     "out",
                     "--format",
                     "hf",
                     "--max-shard-size",
                     "2GiB",
                     "--sample",
                     "5",
                     "--temperature",
                     "0",
                     "--collective-timeout",
                     "1.5"},
                    o, &positionals)
                  .ok());
  EXPECT_EQ(positionals, std::vector<std::string>{"m.dtp"});
  EXPECT_EQ(o.data.dir, "d");
  EXPECT_EQ(o.data.steps, 30);
  EXPECT_FALSE(o.data.seed.has_value());
  EXPECT_EQ(o.checkpoint.dir, "ck");
  EXPECT_EQ(o.checkpoint.keep, 2);
  EXPECT_TRUE(o.checkpoint.async);
  EXPECT_EQ(o.save.format, "hf");
  EXPECT_EQ(o.save.maxShardBytes, 2ull << 30);
  EXPECT_EQ(o.sampling.tokens, 5);
  EXPECT_EQ(o.sampling.temperature, 0.0);
  EXPECT_EQ(o.sampling.topK, 200);  // the declared default
  EXPECT_EQ(o.runtime.collectiveTimeout, 1.5);
  EXPECT_EQ(o.runtime.maxSkippedSteps, 20);
  EXPECT_FALSE(o.runtime.checkNumerics);
}

TEST(TrainFlags, SeedIsAbsentUnlessGiven) {
  TrainOptions o;
  ASSERT_TRUE(parse({"m.dtp", "--seed", "0"}, o).ok());
  ASSERT_TRUE(o.data.seed.has_value());
  EXPECT_EQ(*o.data.seed, 0u);
}

TEST(TrainFlags, RangesNameTheFlagAndTheValue) {
  EXPECT_NE(error({"m.dtp", "--threads", "0"}).find("--threads must be in [1, "),
            std::string::npos);
  EXPECT_NE(error({"m.dtp", "--threads", "40000000"}).find("hardware threads here), got 40000000"),
            std::string::npos);
  EXPECT_EQ(error({"m.dtp", "--collective-timeout", "0"}),
            "--collective-timeout must be in (0, 10000000], got 0");
  EXPECT_EQ(error({"m.dtp", "--keep", "-1"}), "--keep must be in [0, 1000000], got -1");
  EXPECT_EQ(error({"m.dtp", "--seed", "-3"}), "--seed must be in [0, 9.2e+18], got -3");
  EXPECT_NE(error({"m.dtp", "--steps", "ten"}), "");
}

TEST(TrainFlags, ChoicesAreDeclared) {
  EXPECT_EQ(error({"m.dtp", "--save", "o", "--format", "onnx"}),
            "--format must be dtc or hf, got 'onnx'");
}

TEST(TrainFlags, RulesBetweenFlags) {
  EXPECT_EQ(error({"m.dtp", "--format", "hf"}),
            "--format says how --save DIR writes the model: give --save");
  EXPECT_EQ(error({"m.dtp", "--data", "d"}),
            "--data needs --steps N: how many optimizer steps to train (0: none)");
  EXPECT_EQ(error({"m.dtp", "--data", "d", "--steps", "0"}), "");    // given: none to train
  EXPECT_EQ(error({"m.dtp", "--data", "d", "--predict", "p"}), "");  // --predict runs on it
  EXPECT_EQ(error({"m.dtp", "--prompt", "hi", "--sample", "0"}),
            "--prompt, --temperature, --top-k and --tokenizer need --sample N");
  EXPECT_EQ(error({"m.dtp", "--keep", "0"}),
            "--checkpoint-every, --keep and --checkpoint-async need --checkpoint DIR");
  EXPECT_EQ(error({"m.dtp", "--eval-batches", "3"}),
            "--eval-every and --eval-batches need --eval DIR");
  EXPECT_EQ(error({"m.dtp", "--predict", "p"}),
            "--predict needs the data to run on: --eval DIR or --data DIR");
  EXPECT_EQ(error({"m.dtp", "--predict", "p", "--eval", "e"}), "");
  EXPECT_EQ(error({"m.dtp", "--resume", "ck", "--init", "w.safetensors"}),
            "--resume continues a run, --init starts one: give one of them");
  EXPECT_EQ(error({"m.dtp", "--log="}), "--log needs a path");
}

TEST(TrainFlags, RanksAgreeOnWhatShapesTheRun) {
  TrainOptions o;
  ASSERT_TRUE(parse({"m.dtp", "--steps", "7", "--log", "a.jsonl", "--check-numerics"}, o).ok());
  std::vector<std::string> names;
  for (const RunField& f : agreedFlags(o)) {
    names.push_back(f.name);
    const std::string expected = f.name == "--steps"                ? "7"
                                 : f.name == "--seed"               ? "(not given)"
                                 : f.name == "--check-numerics"     ? "on"
                                 : f.name == "--collective-timeout" ? "600"
                                                                    : f.value;
    EXPECT_EQ(f.value, expected) << f.name;
  }
  for (const char* agreed : {"--steps", "--seed", "--data", "--checkpoint", "--device"})
    EXPECT_NE(std::find(names.begin(), names.end(), agreed), names.end()) << agreed;
  for (const char* own : {"--log", "--save", "--trace", "--threads", "--prompt"})
    EXPECT_EQ(std::find(names.begin(), names.end(), own), names.end()) << own;
}

TEST(TrainFlags, UsageListsEveryFlagOnce) {
  const std::string synopsis = trainSynopsis(96, 13, 7), help = trainFlagsHelp();
  std::istringstream lines(synopsis);
  size_t column = 7;  // after "usage: "; the lines after it hold their indent
  for (std::string line; std::getline(lines, line); column = 0)
    EXPECT_LE(column + line.size(), 96u) << line;
  for (const char* flag : {"--data", "--checkpoint-async", "--format dtc|hf", "--check-numerics"}) {
    EXPECT_NE(synopsis.find(flag), std::string::npos) << flag;
    EXPECT_NE(help.find(std::string(flag)), std::string::npos) << flag;
  }
  EXPECT_NE(help.find("--top-k K                       draw from the K likeliest tokens (200)"),
            std::string::npos);
}

TEST(TrainFlags, OtherCommandsShareARange) {
  std::vector<std::string> words = {"dtrun", "--calibrate", "--threads", "0"};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  auto args = Args::parse(4, argv.data(), 1, {"threads"}, {"calibrate"});
  ASSERT_TRUE(args.ok());
  auto threads = integerFlag(*args, "threads", 1);
  ASSERT_FALSE(threads.ok());
  EXPECT_NE(threads.status().message().find("--threads must be in [1, "), std::string::npos);
}

}  // namespace
}  // namespace dtc
