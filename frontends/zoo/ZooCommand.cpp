#include "zoo/ZooCommand.h"

#include <utility>

#include "support/args.h"
#include "zoo/Zoo.h"

namespace dtc::zoo {
namespace {

Status invalid(const std::string& message) { return Status::InvalidInput(message); }

// Each integer flag into its field (keeping the field's value as the default).
Status readIntegers(const Args& args,
                    std::initializer_list<std::pair<const char*, int64_t*>> flags) {
  for (auto [flag, field] : flags) {
    DTC_ASSIGN_OR_RETURN(*field, args.integer(flag, *field));
  }
  return Status::Ok();
}

StatusOr<ZooModel> finish(const Args& args, std::vector<uint8_t> bytes) {
  if (!args.has("output")) return invalid("dtc zoo: missing -o MODEL.dtm");
  return ZooModel{std::move(bytes), args.str("output")};
}

StatusOr<ZooModel> mlp(int argc, char** argv) {
  DTC_ASSIGN_OR_RETURN(
      Args args, Args::parse(argc, argv, 3, {"input", "hidden", "classes", "seed", "output"}, {}));
  MlpOptions o;
  int64_t seed = 0;
  DTC_RETURN_IF_ERROR(
      readIntegers(args, {{"input", &o.input}, {"classes", &o.classes}, {"seed", &seed}}));
  DTC_ASSIGN_OR_RETURN(o.hidden, args.integers("hidden", o.hidden));
  if (o.input <= 0 || o.classes <= 0) return invalid("--input and --classes must be positive");
  for (int64_t h : o.hidden)
    if (h <= 0) return invalid("--hidden sizes must be positive");
  o.seed = static_cast<uint64_t>(seed);
  return finish(args, buildMlp(o));
}

// The mixture-of-experts flags (MoeOptions); none of them without --experts.
Status readMoe(const Args& args, MoeOptions& m) {
  DTC_RETURN_IF_ERROR(
      readIntegers(args, {{"experts", &m.experts}, {"top-k", &m.topK}, {"moe-every", &m.every}}));
  DTC_ASSIGN_OR_RETURN(m.capacityFactor, args.number("capacity-factor", m.capacityFactor));
  DTC_ASSIGN_OR_RETURN(m.auxWeight, args.number("aux-loss-weight", m.auxWeight));
  DTC_ASSIGN_OR_RETURN(m.zWeight, args.number("z-loss-weight", m.zWeight));
  m.normalize = !args.has("no-normalize-top-k");
  m.score = args.str("router-score", m.score);
  if (!args.has("experts"))
    for (const char* flag : {"top-k", "moe-every", "capacity-factor", "aux-loss-weight",
                             "z-loss-weight", "no-normalize-top-k", "router-score"})
      if (args.has(flag)) return invalid(std::string("--") + flag + " needs --experts");
  if (args.has("experts") && m.experts < 1)
    return invalid("--experts must be >= 1, got " + std::to_string(m.experts));
  return Status::Ok();
}

StatusOr<ZooModel> gpt(int argc, char** argv) {
  DTC_ASSIGN_OR_RETURN(
      Args args, Args::parse(argc, argv, 3,
                             {"vocab", "ctx", "layers", "heads", "embd", "seed", "layout", "output",
                              "experts", "top-k", "capacity-factor", "moe-every", "aux-loss-weight",
                              "z-loss-weight", "router-score"},
                             {"no-normalize-top-k"}));
  GptOptions o;
  const std::string layout = args.str("layout", "nanogpt");
  if (layout != "nanogpt" && layout != "hf")
    return invalid("--layout must be nanogpt or hf, got '" + layout + "'");
  o.hfLayout = layout == "hf";
  int64_t seed = 0;
  DTC_RETURN_IF_ERROR(readIntegers(args, {{"vocab", &o.vocab},
                                          {"ctx", &o.ctx},
                                          {"layers", &o.layers},
                                          {"heads", &o.heads},
                                          {"embd", &o.embd},
                                          {"seed", &seed}}));
  DTC_RETURN_IF_ERROR(readMoe(args, o.moe));
  o.seed = static_cast<uint64_t>(seed);
  if (std::string error = validateGpt(o); !error.empty()) return invalid(error);
  return finish(args, buildGpt(o));
}

StatusOr<ZooModel> llama(int argc, char** argv) {
  DTC_ASSIGN_OR_RETURN(
      Args args,
      Args::parse(argc, argv, 3,
                  {"vocab", "ctx", "layers", "heads", "kv-heads", "embd", "ffn", "rope-theta",
                   "rms-eps", "seed", "output", "experts", "top-k", "capacity-factor", "moe-every",
                   "aux-loss-weight", "z-loss-weight", "router-score"},
                  {"tie-embeddings", "no-normalize-top-k"}));
  LlamaOptions o;
  int64_t seed = 0;
  o.kvHeads = 0;  // as many as --heads unless given
  o.ffn = 0;      // from --embd unless given
  DTC_RETURN_IF_ERROR(readIntegers(args, {{"vocab", &o.vocab},
                                          {"ctx", &o.ctx},
                                          {"layers", &o.layers},
                                          {"heads", &o.heads},
                                          {"kv-heads", &o.kvHeads},
                                          {"embd", &o.embd},
                                          {"ffn", &o.ffn},
                                          {"seed", &seed}}));
  if (!args.has("kv-heads")) o.kvHeads = o.heads;
  if (!args.has("ffn")) o.ffn = defaultLlamaFfn(o.embd);
  DTC_ASSIGN_OR_RETURN(o.ropeTheta, args.number("rope-theta", o.ropeTheta));
  DTC_ASSIGN_OR_RETURN(o.rmsEps, args.number("rms-eps", o.rmsEps));
  o.tieEmbeddings = args.has("tie-embeddings");
  DTC_RETURN_IF_ERROR(readMoe(args, o.moe));
  o.seed = static_cast<uint64_t>(seed);
  if (std::string error = validateLlama(o); !error.empty()) return invalid(error);
  return finish(args, buildLlama(o));
}

StatusOr<ZooModel> convnet(int argc, char** argv) {
  DTC_ASSIGN_OR_RETURN(Args args, Args::parse(argc, argv, 3, {"classes", "seed", "output"}, {}));
  ConvNetOptions o;
  int64_t seed = 0;
  DTC_RETURN_IF_ERROR(readIntegers(args, {{"classes", &o.classes}, {"seed", &seed}}));
  if (o.classes <= 0) return invalid("--classes must be positive");
  o.seed = static_cast<uint64_t>(seed);
  return finish(args, buildConvNet(o));
}

}  // namespace

StatusOr<ZooModel> zooModelFromArgs(int argc, char** argv) {
  const std::string model = argc >= 3 ? argv[2] : "";
  if (model == "mlp") return mlp(argc, argv);
  if (model == "gpt") return gpt(argc, argv);
  if (model == "llama") return llama(argc, argv);
  if (model == "convnet") return convnet(argc, argv);
  return invalid("dtc zoo: unknown model '" + model + "' (available: mlp, gpt, llama, convnet)");
}

}  // namespace dtc::zoo
