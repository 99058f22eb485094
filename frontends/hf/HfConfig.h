// A Hugging Face config.json as a model family reads it. Every setting is accounted for: a
// family reads the ones that shape its model, names those that leave training alone (token
// ids, generation defaults), and any other key is an error, so no setting is silently ignored.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include "io/json.h"
#include "support/status.h"

namespace dtc::hf {

class ConfigReader {
 public:
  // `path` names the file in messages ("DIR/config.json").
  ConfigReader(io::Json config, std::string path);

  const std::string& path() const { return path_; }
  const std::string& modelType() const { return modelType_; }

  // The value of `key`, checked for its type; a missing or null key takes `fallback`, and is an
  // error without one. Each marks the key as read.
  StatusOr<int64_t> integer(const std::string& key, std::optional<int64_t> fallback = {});
  StatusOr<double> number(const std::string& key, std::optional<double> fallback = {});
  StatusOr<bool> boolean(const std::string& key, std::optional<bool> fallback = {});
  StatusOr<std::string> text(const std::string& key, std::optional<std::string> fallback = {});
  // The raw value (nullptr when missing), marked as read.
  const io::Json* value(const std::string& key);
  // Whether `key` is present and not null (not a read).
  bool has(const std::string& key) const;

  // Keys that change nothing dtc builds or trains: these, or those `inert` says so of.
  void inert(std::initializer_list<const char*> keys);
  void inertWhere(bool (*inert)(const std::string&));
  // `key` must be missing, null, or `expected` (false, 0, an empty list...): "what" says why.
  Status mustBe(const std::string& key, const io::Json& expected, const std::string& what);

  // Every key read or inert: otherwise the first other one, "DIR/config.json: 'key' (model_type
  // llama) is a setting dtc does not implement".
  Status finish() const;

  // "DIR/config.json: <message>".
  Status error(const std::string& message) const;

 private:
  StatusOr<const io::Json*> present(const std::string& key, bool hasFallback, const char* kind);

  io::Json config_;
  std::string path_, modelType_;
  std::set<std::string> read_;
};

// The keys of every PretrainedConfig that change nothing dtc trains (generation defaults,
// token ids, names, output switches), and those that must keep their defaults for a causal
// language model (no encoder-decoder, no cross-attention, no pruned heads): read or checked.
Status readCommonKeys(ConfigReader& config);

}  // namespace dtc::hf
