#include "model/LayerStack.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "model/model_version.h"

namespace dtc {
namespace {

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// What a node computes, whatever layer it is in: its name without the layer, its op and its
// attributes.
std::string signature(const model::Node& node, const std::string& layer) {
  std::ostringstream os;
  std::string name = str(node.name());
  os << name.substr(std::min(layer.size(), name.size())) << '|' << node.op_type()->str();
  if (node.attributes())
    for (const model::Attribute* a : *node.attributes()) {
      os << '|' << a->name()->str() << ':' << static_cast<int>(a->kind()) << ':' << a->i() << ':'
         << a->f() << ':' << str(a->s());
      if (a->ints())
        for (int64_t v : *a->ints()) os << ',' << v;
      if (a->floats())
        for (double v : *a->floats()) os << ',' << v;
    }
  os << '|' << (node.inputs() ? node.inputs()->size() : 0) << '|'
     << (node.outputs() ? node.outputs()->size() : 0);
  return os.str();
}

std::string shapeText(const model::TensorInfo& info) {
  std::string s = std::to_string(static_cast<int>(info.dtype()));
  if (info.shape())
    for (int64_t d : *info.shape()) s += "," + std::to_string(d);
  return s;
}

bool fail(std::string* why, const std::string& text) {
  if (why) *why = text;
  return false;
}

struct Analysis {
  LayerStack stack;
  std::vector<int64_t> layerOfNode;         // -1 before the stack, layers() after it
  std::vector<std::string> carried;         // the tensor each layer passes on
  std::vector<std::set<std::string>> side;  // each layer's tensors read only after the stack
};

bool analyse(const model::Model& m, Analysis& a, std::string* why) {
  const auto* nodes = m.graph()->nodes();
  if (!nodes || nodes->size() == 0) return fail(why, "the model has no nodes");
  std::map<std::string, int64_t> index;  // layer name -> position in the stack
  std::vector<std::vector<uint32_t>> members;
  int64_t current = -1;
  for (uint32_t i = 0; i < nodes->size(); ++i) {
    const std::string layer = layerOf(str(nodes->Get(i)->name()));
    if (layer.empty()) {
      a.layerOfNode.push_back(current < 0 ? -1 : -2);  // after the first layer: fixed below
      if (current < 0) a.stack.nodesBefore = true;
      if (current >= 0 && a.stack.nodeAfter.empty()) a.stack.nodeAfter = str(nodes->Get(i)->name());
      continue;
    }
    auto [it, added] = index.emplace(layer, static_cast<int64_t>(a.stack.layers.size()));
    if (added) {
      if (current >= 0 && a.layerOfNode.back() == -2)
        return fail(why, "nodes outside the layers sit between layer " + a.stack.layers.back() +
                             " and " + layer);
      a.stack.layers.push_back(layer);
      a.stack.firstNodes.push_back(str(nodes->Get(i)->name()));
      members.emplace_back();
    } else if (it->second != current) {
      return fail(why, "layer " + layer + "'s nodes are not consecutive");
    }
    current = it->second;
    members[current].push_back(i);
    a.layerOfNode.push_back(current);
  }
  const int64_t layers = a.stack.size();
  if (layers < 2) return fail(why, "the model has no stack of two or more layers");
  for (int64_t& l : a.layerOfNode)
    if (l == -2) l = layers;
  // Same prefix, indices 0, 1, 2, ... in order.
  const std::string& first = a.stack.layers[0];
  const size_t digits = first.find_last_not_of("0123456789") + 1;
  for (int64_t l = 0; l < layers; ++l)
    if (a.stack.layers[l] != first.substr(0, digits) + std::to_string(l))
      return fail(why, "layer names are not " + first.substr(0, digits) + "0, 1, ...");
  // The same nodes and parameter shapes in every layer.
  std::map<std::string, const model::Initializer*> initializers;
  if (const auto* inits = m.graph()->initializers())
    for (const model::Initializer* init : *inits) initializers[init->info()->name()->str()] = init;
  auto layerText = [&](int64_t l) {
    std::string text;
    for (uint32_t i : members[l]) {
      const model::Node& node = *nodes->Get(i);
      text += signature(node, a.stack.layers[l]) + '\n';
      if (node.inputs())
        for (const auto* in : *node.inputs())
          if (auto it = initializers.find(in->str()); it != initializers.end())
            text += shapeText(*it->second->info()) + (it->second->trainable() ? "t" : "f") +
                    (it->second->constant() ? "c" : "") + ' ';
      text += '\n';
    }
    return text;
  };
  const std::string reference = layerText(0);
  for (int64_t l = 1; l < layers; ++l)
    if (layerText(l) != reference)
      return fail(why, "layer " + a.stack.layers[l] + " differs from " + first);
  // Each layer reads one tensor of the layer before; what follows reads one of the last, and
  // may read side outputs of any (a router's loss, summed into the training loss after the
  // stack). The last layer's carried tensor is the one named as the others' are.
  std::map<std::string, int64_t> producer;
  for (uint32_t i = 0; i < nodes->size(); ++i)
    if (const auto* outs = nodes->Get(i)->outputs())
      for (const auto* out : *outs) producer[out->str()] = a.layerOfNode[i];
  a.carried.assign(layers, "");
  a.side.assign(layers, {});
  std::set<std::string> readAfter;  // the last layer's tensors read after the stack
  for (uint32_t i = 0; i < nodes->size(); ++i) {
    const int64_t reader = a.layerOfNode[i];
    if (reader < 0 || !nodes->Get(i)->inputs()) continue;
    for (const auto* in : *nodes->Get(i)->inputs()) {
      auto it = producer.find(in->str());
      if (it == producer.end() || it->second < 0 || it->second == reader) continue;
      const int64_t from = it->second;
      if (reader == layers) {
        (from == layers - 1 ? readAfter : a.side[from]).insert(in->str());
        continue;
      }
      if (from != reader - 1)
        return fail(why, "node " + str(nodes->Get(i)->name()) + " reads " + in->str() +
                             " from a layer other than the one before it");
      if (!a.carried[from].empty() && a.carried[from] != in->str())
        return fail(why, "layer " + a.stack.layers[from] + " passes on more than one tensor");
      a.carried[from] = in->str();
    }
  }
  const std::string& last = a.stack.layers[layers - 1];
  const std::string lastCarried =
      last + a.carried[0].substr(std::min(a.carried[0].size(), a.stack.layers[0].size()));
  if (readAfter.size() == 1)
    a.carried[layers - 1] = *readAfter.begin();
  else if (readAfter.count(lastCarried))
    a.carried[layers - 1] = lastCarried;
  else if (!readAfter.empty())
    return fail(why, "layer " + last + " passes on more than one tensor");
  readAfter.erase(a.carried[layers - 1]);
  a.side[layers - 1] = readAfter;
  for (int64_t l = 0; l < layers; ++l) {
    if (a.carried[l].empty())
      return fail(why, "nothing reads layer " + a.stack.layers[l] + "'s output");
    if (a.side[l].count(a.carried[l]))
      return fail(why, "what follows the stack reads layer " + a.stack.layers[l] + "'s output " +
                           a.carried[l]);
  }
  if (const auto* outs = m.graph()->outputs())
    for (const auto* out : *outs)
      if (auto it = producer.find(out->str());
          it != producer.end() && it->second >= 0 && it->second < layers)
        return fail(why, "the model's output " + out->str() + " comes from inside a layer");
  return true;
}

using Builder = flatbuffers::FlatBufferBuilder;

flatbuffers::Offset<model::TensorInfo> copyInfo(Builder& b, const model::TensorInfo& t) {
  std::vector<int64_t> shape;
  if (t.shape()) shape.assign(t.shape()->begin(), t.shape()->end());
  return model::CreateTensorInfoDirect(b, t.name()->c_str(), t.dtype(), &shape);
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> strings(
    Builder& b, const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* list,
    const std::map<std::string, std::string>* renames = nullptr) {
  std::vector<std::string> out;
  if (list)
    for (const auto* s : *list) {
      auto it = renames ? renames->find(s->str()) : decltype(renames->end())();
      out.push_back(renames && it != renames->end() ? it->second : s->str());
    }
  return b.CreateVectorOfStrings(out);
}

// How the nodes after the stack read a cut to fewer layers: what the dropped layers' side
// outputs fed is gone, and a sum of a dropped term and a kept value is the kept value, under
// the sum's name (the training loss stays "loss").
struct Renames {
  std::set<uint32_t> droppedNodes;            // after the stack, reading only dropped terms
  std::map<std::string, std::string> tensor;  // what a node after the stack reads instead
  std::map<std::string, std::string> output;  // a kept value taking a folded sum's name
  std::string of(const std::string& name) const {
    auto it = tensor.find(name);
    return it != tensor.end() ? it->second : name;
  }
};

llvm::Expected<Renames> withoutDroppedSides(const ModelFile& file, const Analysis& a,
                                            int64_t keep) {
  const model::Graph& g = *file.model().graph();
  std::set<std::string> dropped, parameters;
  for (int64_t l = keep; l < a.stack.size(); ++l)
    dropped.insert(a.side[l].begin(), a.side[l].end());
  if (g.initializers())
    for (const model::Initializer* init : *g.initializers())
      parameters.insert(init->info()->name()->str());
  Renames r;
  std::map<std::string, std::string> folded;  // a folded sum's output -> the value it passes on
  std::vector<std::string> foldOrder;         // the folded sums' outputs in node order
  std::map<std::string, uint32_t> madeAfter;  // outputs of kept nodes after the stack
  auto resolve = [&](std::string name) {
    for (auto it = folded.find(name); it != folded.end(); it = folded.find(name)) name = it->second;
    return name;
  };
  for (uint32_t i = 0; i < g.nodes()->size(); ++i) {
    if (a.layerOfNode[i] != a.stack.size()) continue;
    const model::Node& n = *g.nodes()->Get(i);
    std::vector<std::string> kept;
    size_t droppedInputs = 0;
    if (n.inputs())
      for (const auto* in : *n.inputs()) {
        const std::string name = resolve(in->str());
        if (dropped.count(name))
          ++droppedInputs;
        else if (!parameters.count(name))
          kept.push_back(name);
      }
    const std::string out = n.outputs() && n.outputs()->size() ? n.outputs()->Get(0)->str() : "";
    if (droppedInputs == 0) {
      if (n.outputs())
        for (const auto* o : *n.outputs()) madeAfter[o->str()] = i;
      continue;
    }
    r.droppedNodes.insert(i);
    if (kept.empty()) {
      if (n.outputs())
        for (const auto* o : *n.outputs()) dropped.insert(o->str());
    } else if (n.op_type()->str() == "Add" && kept.size() == 1 && n.outputs()->size() == 1) {
      folded[out] = kept[0];
      foldOrder.push_back(out);
    } else {
      return llvm::createStringError(
          "%s: node %s mixes a dropped layer's output with others; only sums of them can be cut",
          file.name().c_str(), str(n.name()).c_str());
    }
  }
  // Each kept value a folded chain passes on takes the name of the chain's last sum, where a
  // kept node after the stack makes it; readers of any sum of the chain read it.
  std::map<std::string, std::string> lastName;  // kept value -> its chain's last sum
  for (const std::string& name : foldOrder) lastName[resolve(name)] = name;
  for (const auto& [value, name] : lastName)
    if (madeAfter.count(value)) r.output[value] = r.tensor[value] = name;
  for (const std::string& name : foldOrder) {
    const std::string value = resolve(name);
    r.tensor[name] = madeAfter.count(value) ? lastName[value] : value;
  }
  return r;
}

}  // namespace

std::string layerOf(const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find_first_of("./", start);
    if (end == std::string::npos) end = name.size();
    if (end > start && std::all_of(name.begin() + start, name.begin() + end,
                                   [](char c) { return c >= '0' && c <= '9'; }))
      return name.substr(0, end);
    start = end + 1;
  }
  return "";
}

std::optional<LayerStack> findLayerStack(const model::Model& model, std::string* why) {
  Analysis a;
  if (!analyse(model, a, why)) return std::nullopt;
  return a.stack;
}

llvm::Expected<ModelFile> keepLayers(const ModelFile& file, const LayerStack& stack, int64_t keep) {
  const model::Model& m = file.model();
  Analysis a;
  std::string why;
  if (!analyse(m, a, &why) || a.stack.layers != stack.layers)
    return llvm::createStringError("%s: not the layer stack it was: %s", file.name().c_str(),
                                   why.c_str());
  if (keep < 1 || keep > stack.size())
    return llvm::createStringError("%s: cannot keep %lld of %lld layers", file.name().c_str(),
                                   static_cast<long long>(keep),
                                   static_cast<long long>(stack.size()));
  const std::string from = a.carried[stack.size() - 1], to = a.carried[keep - 1];
  const model::Graph& g = *m.graph();
  llvm::Expected<Renames> renames = withoutDroppedSides(file, a, keep);
  if (!renames) return renames.takeError();
  Renames names = std::move(*renames);
  names.tensor[from] = to;
  Builder b;
  std::vector<flatbuffers::Offset<model::Node>> nodes;
  std::set<std::string> read;
  for (uint32_t i = 0; i < g.nodes()->size(); ++i) {
    const int64_t layer = a.layerOfNode[i];
    if ((layer >= keep && layer < stack.size()) || names.droppedNodes.count(i)) continue;
    const model::Node& n = *g.nodes()->Get(i);
    if (n.inputs())
      for (const auto* in : *n.inputs()) read.insert(in->str());
    std::vector<flatbuffers::Offset<model::Attribute>> attrs;
    if (n.attributes())
      for (const model::Attribute* at : *n.attributes()) {
        std::vector<int64_t> ints;
        std::vector<double> floats;
        if (at->ints()) ints.assign(at->ints()->begin(), at->ints()->end());
        if (at->floats()) floats.assign(at->floats()->begin(), at->floats()->end());
        attrs.push_back(model::CreateAttributeDirect(b, at->name()->c_str(), at->kind(), at->i(),
                                                     at->f(), at->s() ? at->s()->c_str() : nullptr,
                                                     at->ints() ? &ints : nullptr,
                                                     at->floats() ? &floats : nullptr));
      }
    auto name = n.name() ? b.CreateString(n.name()->str()) : 0;
    auto op = b.CreateString(n.op_type()->str());
    auto ins = strings(b, n.inputs(), layer == stack.size() ? &names.tensor : nullptr);
    auto outs = strings(b, n.outputs(), &names.output);
    nodes.push_back(model::CreateNode(b, name, op, ins, outs, b.CreateVector(attrs)));
  }
  std::vector<flatbuffers::Offset<model::Initializer>> inits;
  if (g.initializers())
    for (const model::Initializer* init : *g.initializers()) {
      if (!read.count(init->info()->name()->str())) continue;  // only dropped layers read it
      auto info = copyInfo(b, *init->info());
      auto raw =
          init->raw_data() ? b.CreateVector(init->raw_data()->data(), init->raw_data()->size()) : 0;
      auto floats = init->float_data()
                        ? b.CreateVector(init->float_data()->data(), init->float_data()->size())
                        : 0;
      flatbuffers::Offset<model::InitRule> rule;
      if (init->init())
        rule = model::CreateInitRule(b, init->init()->kind(), init->init()->a(), init->init()->b(),
                                     init->init()->seed());
      auto aliases = init->aliases() ? strings(b, init->aliases()) : 0;
      inits.push_back(model::CreateInitializer(b, info, init->trainable(), raw, floats, rule,
                                               aliases, init->constant()));
    }
  std::vector<flatbuffers::Offset<model::TensorInfo>> inputs;
  if (g.inputs())
    for (const model::TensorInfo* t : *g.inputs()) inputs.push_back(copyInfo(b, *t));
  auto rename = [&](const flatbuffers::String* s) {
    return s ? b.CreateString(names.of(s->str())) : 0;
  };
  auto graph = model::CreateGraph(b, g.name() ? b.CreateString(g.name()->str()) : 0,
                                  b.CreateVector(inputs), strings(b, g.outputs(), &names.tensor),
                                  b.CreateVector(inits), b.CreateVector(nodes), rename(g.loss()),
                                  rename(g.predictions()), rename(g.targets()));
  auto root = model::CreateModel(b, m.version(),
                                 m.producer() ? b.CreateString(m.producer()->str()) : 0, graph);
  b.Finish(root, model::ModelIdentifier());
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  return ModelFile::fromBytes(std::move(bytes), file.name() + " (" + std::to_string(keep) + " of " +
                                                    std::to_string(stack.size()) + " layers)");
}

}  // namespace dtc
