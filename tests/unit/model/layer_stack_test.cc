// The layer stack explore's estimate prices deep models by: found in the zoo's GPT, cut to fewer
// layers it is the zoo's shallower GPT node for node and tensor for tensor, and models whose
// layers differ or that have none are refused with the reason.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flatbuffers/LayerStack.h"
#include "flatbuffers/ModelBuilder.h"
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

// Every node (name, op, inputs, outputs) and every initializer (name, shape) in order.
std::vector<std::string> listing(const model::Model& m) {
  std::vector<std::string> out;
  for (const model::Node* n : *m.graph()->nodes()) {
    std::string line = (n->name() ? n->name()->str() : "") + " " + n->op_type()->str() + " <-";
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
