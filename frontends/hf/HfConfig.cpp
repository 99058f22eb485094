#include "hf/HfConfig.h"

#include <cmath>

#include "io/hf_config_keys.h"
#include "support/printable.h"

namespace dtc::hf {
namespace {

std::string shown(const io::Json& v) { return printable(v.isString() ? v.asString() : v.dump()); }

}  // namespace

ConfigReader::ConfigReader(io::Json config, std::string path)
    : config_(std::move(config)), path_(std::move(path)) {
  if (const io::Json* type = config_.find("model_type"); type && type->isString())
    modelType_ = type->asString();
  read_.insert("model_type");
}

Status ConfigReader::error(const std::string& message) const {
  return Status::InvalidInput(path_ + ": " + message);
}

bool ConfigReader::has(const std::string& key) const {
  const io::Json* v = config_.find(key);
  return v && !v->isNull();
}

const io::Json* ConfigReader::value(const std::string& key) {
  read_.insert(key);
  return config_.find(key);
}

StatusOr<const io::Json*> ConfigReader::present(const std::string& key, bool hasFallback,
                                                const char* kind) {
  const io::Json* v = value(key);
  if (v && !v->isNull()) return v;
  if (hasFallback) return static_cast<const io::Json*>(nullptr);
  return error(std::string("no ") + key + " (" + kind + "), which a " + modelType_ +
               " model needs");
}

StatusOr<int64_t> ConfigReader::integer(const std::string& key, std::optional<int64_t> fallback) {
  DTC_ASSIGN_OR_RETURN(const io::Json* v, present(key, fallback.has_value(), "an integer"));
  if (!v) return *fallback;
  // json.dump writes whole floats as 8.0 where a config computed them.
  if (v->isNumber() && !v->isInteger() && std::floor(v->asDouble()) == v->asDouble() &&
      std::fabs(v->asDouble()) < 9e15)
    return static_cast<int64_t>(v->asDouble());
  if (!v->isInteger()) return error(key + " must be an integer, got " + shown(*v));
  return v->asInt();
}

StatusOr<double> ConfigReader::number(const std::string& key, std::optional<double> fallback) {
  DTC_ASSIGN_OR_RETURN(const io::Json* v, present(key, fallback.has_value(), "a number"));
  if (!v) return *fallback;
  if (!v->isNumber()) return error(key + " must be a number, got " + shown(*v));
  return v->asDouble();
}

StatusOr<bool> ConfigReader::boolean(const std::string& key, std::optional<bool> fallback) {
  DTC_ASSIGN_OR_RETURN(const io::Json* v, present(key, fallback.has_value(), "true or false"));
  if (!v) return *fallback;
  if (!v->isBool()) return error(key + " must be true or false, got " + shown(*v));
  return v->asBool();
}

StatusOr<std::string> ConfigReader::text(const std::string& key,
                                         std::optional<std::string> fallback) {
  DTC_ASSIGN_OR_RETURN(const io::Json* v, present(key, fallback.has_value(), "a string"));
  if (!v) return *fallback;
  if (!v->isString()) return error(key + " must be a string, got " + shown(*v));
  return v->asString();
}

void ConfigReader::inert(std::initializer_list<const char*> keys) {
  for (const char* key : keys) read_.insert(key);
}

void ConfigReader::inertWhere(bool (*inert)(const std::string&)) {
  for (const auto& [key, v] : config_.members())
    if (inert(key)) read_.insert(key);
}

Status ConfigReader::mustBe(const std::string& key, const io::Json& expected,
                            const std::string& what) {
  const io::Json* v = value(key);
  if (!v || v->isNull() || *v == expected) return Status::Ok();
  if (expected.isNumber() && v->isNumber() && v->asDouble() == expected.asDouble())
    return Status::Ok();
  // An empty list or object stands for "none" as well as the expected value does.
  if ((v->isArray() || v->isObject()) && v->size() == 0 && (expected.size() == 0))
    return Status::Ok();
  return error(key + " is " + shown(*v) + ": " + what);
}

Status ConfigReader::finish() const {
  // A null setting is "none", what an unread one means.
  for (const auto& [key, v] : config_.members())
    if (!read_.count(key) && !v.isNull())
      return error("'" + printable(key) + "' (model_type " + printable(modelType_) +
                   ") is a setting dtc does not implement");
  return Status::Ok();
}

Status readCommonKeys(ConfigReader& c) {
  // What generation, tokenizers and tooling read; nothing of the model's arithmetic.
  c.inertWhere(io::hfSettingLeavesTrainingAlone);
  DTC_RETURN_IF_ERROR(c.mustBe("is_encoder_decoder", false, "dtc builds decoder-only models"));
  DTC_RETURN_IF_ERROR(
      c.mustBe("add_cross_attention", false, "dtc's decoders have no cross-attention"));
  DTC_RETURN_IF_ERROR(
      c.mustBe("cross_attention_hidden_size", nullptr, "dtc's decoders have no cross-attention"));
  DTC_RETURN_IF_ERROR(c.mustBe("pruned_heads", io::Json::object(),
                               "dtc builds every head (a pruned model is not implemented)"));
  DTC_RETURN_IF_ERROR(c.mustBe("torchscript", false,
                               "torchscript unties the embeddings, which dtc does not implement"));
  if (const io::Json* dtype = c.value("torch_dtype"); dtype && !dtype->isNull()) {
    const std::string t = dtype->isString() ? dtype->asString() : "";
    if (t != "float32" && t != "bfloat16" && t != "float16")
      return c.error("torch_dtype must be float32, bfloat16 or float16, got " + shown(*dtype));
  }
  return Status::Ok();
}

}  // namespace dtc::hf
