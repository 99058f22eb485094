// The layer stack explore's estimate prices deep models by: found in the zoo's GPT, cut to fewer
// layers it is the zoo's shallower GPT node for node and tensor for tensor (with mixture-of-
// experts layers too, on GPT and Llama: their router losses, summed after the stack, are cut
// with their layers), and models whose layers differ or that have none are refused with the
// reason.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "model/LayerStack.h"
#include "model/ModelBuilder.h"
#include "zoo/Zoo.h"

namespace dtc {
namespace {

ModelFile gpt(int64_t layers) {
  zoo::GptOptions o;
  o.layers = layers;
  o.vocab = 64;
  o.ctx = 8;
  o.embd = 16;
  o.heads = 2;
  auto file = ModelFile::fromBytes(zoo::buildGpt(o), "gpt" + std::to_string(layers));
  EXPECT_TRUE(static_cast<bool>(file));
  return std::move(*file);
}

ModelFile moeGpt(int64_t layers) {
  zoo::GptOptions o;
  o.layers = layers;
  o.vocab = 64;
  o.ctx = 8;
  o.embd = 16;
  o.heads = 2;
  o.moe.experts = 4;
  auto file = ModelFile::fromBytes(zoo::buildGpt(o), "moe-gpt" + std::to_string(layers));
  EXPECT_TRUE(static_cast<bool>(file));
  return std::move(*file);
}

ModelFile moeLlama(int64_t layers, double zWeight) {
  zoo::LlamaOptions o;
  o.layers = layers;
  o.vocab = 64;
  o.ctx = 8;
  o.embd = 16;
  o.heads = 4;
  o.kvHeads = 2;
  o.ffn = 24;
  o.moe.experts = 8;
  o.moe.topK = 3;
  o.moe.score = "sigmoid";
  o.moe.zWeight = zWeight;
  auto file = ModelFile::fromBytes(zoo::buildLlama(o), "moe-llama" + std::to_string(layers));
  EXPECT_TRUE(static_cast<bool>(file));
  return std::move(*file);
}

// Every node (name, op, inputs, outputs) and every initializer (name, shape) in order.
std::vector<std::string> listing(const model::Model& m, bool nodeNames = true) {
  std::vector<std::string> out;
  for (const model::Node* n : *m.graph()->nodes()) {
    std::string line =
        (n->name() && nodeNames ? n->name()->str() : "") + " " + n->op_type()->str() + " <-";
    for (const auto* in : *n->inputs()) line += " " + in->str();
    line += " ->";
    for (const auto* o : *n->outputs()) line += " " + o->str();
    out.push_back(line);
  }
  for (const model::Initializer* init : *m.graph()->initializers()) {
    std::string line = init->info()->name()->str();
    for (int64_t d : *init->info()->shape()) line += " " + std::to_string(d);
    out.push_back(line);
  }
  out.push_back("loss " + m.graph()->loss()->str());
  return out;
}

TEST(LayerStack, FindsTheGptsBlocks) {
  ModelFile model = gpt(5);
  std::string why;
  std::optional<LayerStack> stack = findLayerStack(model.model(), &why);
  ASSERT_TRUE(stack) << why;
  ASSERT_EQ(stack->size(), 5);
  EXPECT_EQ(stack->layers[0], "transformer.h.0");
  EXPECT_EQ(stack->layers[4], "transformer.h.4");
  EXPECT_EQ(stack->firstNodes[3], "transformer.h.3.ln_1");
}

TEST(LayerStack, KeepingLayersGivesTheShallowerModel) {
  ModelFile deep = gpt(6);
  std::optional<LayerStack> stack = findLayerStack(deep.model());
  ASSERT_TRUE(stack);
  for (int64_t keep : {1, 3, 6}) {
    auto cut = keepLayers(deep, *stack, keep);
    ASSERT_TRUE(static_cast<bool>(cut)) << llvm::toString(cut.takeError());
    // The zoo's shallow model writes the final norm's input as the last layer's output name.
    std::vector<std::string> expected = listing(gpt(keep).model());
    EXPECT_EQ(listing(cut->model()), expected) << "keeping " << keep << " layers";
  }
  EXPECT_FALSE(static_cast<bool>(keepLayers(deep, *stack, 0)));
  EXPECT_FALSE(static_cast<bool>(keepLayers(deep, *stack, 7)));
}

// The router losses are each layer's side outputs, summed into "loss" after the stack: a cut
// keeps the kept layers' terms, the same sums under the same tensor names (the last sum's node
// keeps its name), so it is the zoo's shallower model but for that node's name.
TEST(LayerStack, KeepingMixtureOfExpertsLayersKeepsTheirRouterLosses) {
  for (auto build :
       {std::function<ModelFile(int64_t)>(moeGpt),
        std::function<ModelFile(int64_t)>([](int64_t l) { return moeLlama(l, 0); }),
        std::function<ModelFile(int64_t)>([](int64_t l) { return moeLlama(l, 0.001); })}) {
    ModelFile deep = build(5);
    std::string why;
    std::optional<LayerStack> stack = findLayerStack(deep.model(), &why);
    ASSERT_TRUE(stack) << deep.name() << ": " << why;
    ASSERT_EQ(stack->size(), 5);
    for (int64_t keep : {1, 2, 5}) {
      auto cut = keepLayers(deep, *stack, keep);
      ASSERT_TRUE(static_cast<bool>(cut)) << llvm::toString(cut.takeError());
      EXPECT_EQ(listing(cut->model(), false), listing(build(keep).model(), false))
          << deep.name() << " keeping " << keep << " layers";
      EXPECT_EQ(cut->model().graph()->loss()->str(), "loss");
    }
  }
}

TEST(LayerStack, RefusesModelsWithoutOne) {
  zoo::MlpOptions mlp;
  auto file = ModelFile::fromBytes(zoo::buildMlp(mlp), "mlp");
  ASSERT_TRUE(static_cast<bool>(file));
  std::string why;
  EXPECT_FALSE(findLayerStack(file->model(), &why));
  EXPECT_NE(why.find("no stack"), std::string::npos) << why;

  // Two blocks that differ (the second is wider) are not a stack.
  ModelBuilder b("uneven");
  b.input("x", model::DType::f32, {-1, 4});
  b.constantParameter("h.0.fc.weight", {4, 4}, 1.0);
  b.constantParameter("h.1.fc.weight", {8, 4}, 1.0);
  b.node("h.0.fc", "Linear", {"x", "h.0.fc.weight"}, {"h.0.out"});
  b.node("h.1.fc", "Linear", {"h.0.out", "h.1.fc.weight"}, {"h.1.out"});
  b.node("loss", "MeanSquare", {"h.1.out"}, {"loss"});
  b.setOutputs({"loss"}, "loss");
  auto uneven = ModelFile::fromBytes(b.finish(), "uneven");
  ASSERT_TRUE(static_cast<bool>(uneven));
  EXPECT_FALSE(findLayerStack(uneven->model(), &why));
  EXPECT_NE(why.find("differs"), std::string::npos) << why;
}

}  // namespace
}  // namespace dtc
