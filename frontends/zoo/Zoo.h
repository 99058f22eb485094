// The built-in models (`dtc zoo`), written with the model builder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flatbuffers/ModelBuilder.h"

namespace dtc::zoo {

// Node attributes, as the zoo's builders spell them.
using Attr = NodeAttr;

struct MlpOptions {
  int64_t input = 784;
  std::vector<int64_t> hidden = {256, 128};
  int64_t classes = 10;
  uint64_t seed = 0;
};

// Linear -> ReLU -> ... -> Linear with cross-entropy loss; parameters named fc0.weight,
// fc0.bias, ... in PyTorch's [out, in] layout with nn.Linear's default initialisation.
std::vector<uint8_t> buildMlp(const MlpOptions& options);

struct GptOptions {
  int64_t vocab = 256;
  int64_t ctx = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t embd = 64;
  uint64_t seed = 0;
};

// Checks the options (heads must divide the embedding...): "" when valid, else the reason.
std::string validateGpt(const GptOptions& options);

struct ConvNetOptions {
  int64_t classes = 10;
  uint64_t seed = 0;
};

// The classic two-block MNIST ConvNet: [Conv2d(5, pad 2) -> BatchNorm2d -> ReLU -> MaxPool2d(2)]
// x 2 (16 then 32 channels) -> flatten -> Linear(7·7·32, classes), named as PyTorch's
// nn.Sequential (layer1.0.weight, layer1.1.running_mean, ..., fc.weight) with PyTorch's
// default initialisation. Input: `input` [N, 784] (28×28 images, reshaped inside).
std::vector<uint8_t> buildConvNet(const ConvNetOptions& options);

// GPT-2 as nanoGPT's model.py (biases on, no dropout, LM head tied to the token embedding),
// with its parameter names, layouts and initialisation; inputs idx and targets [B, T] (int64).
std::vector<uint8_t> buildGpt(const GptOptions& options);

}  // namespace dtc::zoo
