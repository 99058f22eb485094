#include "zoo/Rotary.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dtc::zoo {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// What transformers' _compute_default_rope_parameters gives, rounded to float32 as it is held.
std::vector<double> defaultFrequencies(double theta, int64_t dim) {
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    f[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / dim));
  return f;
}

}  // namespace

std::string validateRope(const RopeScaling& s, int64_t dim) {
  const std::string& t = s.type;
  if (t != "default" && t != "linear" && t != "dynamic" && t != "yarn" && t != "longrope" &&
      t != "llama3")
    return "rope_type '" + t +
           "' is not one dtc implements (default, linear, dynamic, yarn, longrope, llama3)";
  if (t == "default") return "";
  if (t != "longrope" && !(s.factor >= 1.0))
    return "rope_scaling's factor must be >= 1 for " + t + ", got " + number(s.factor);
  if (t == "llama3") {
    if (s.originalMaxPositions <= 0)
      return "rope_scaling llama3 needs original_max_position_embeddings > 0";
    if (!(s.lowFreqFactor > 0) || !(s.highFreqFactor > s.lowFreqFactor))
      return "rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor, got " +
             number(s.lowFreqFactor) + " and " + number(s.highFreqFactor);
  }
  if (t == "yarn" && !(s.betaFast > 0 && s.betaSlow > 0))
    return "rope_scaling yarn needs beta_fast and beta_slow > 0";
  if (t == "longrope") {
    const size_t pairs = static_cast<size_t>(dim / 2);
    if (s.longFactor.size() != pairs || s.shortFactor.size() != pairs)
      return "rope_scaling longrope needs long_factor and short_factor of " +
             std::to_string(pairs) + " values each (head_dim/2), got " +
             std::to_string(s.longFactor.size()) + " and " + std::to_string(s.shortFactor.size());
    for (const std::vector<double>* factors : {&s.longFactor, &s.shortFactor})
      for (double f : *factors)
        if (!(f > 0)) return "rope_scaling longrope's factors must be > 0";
  }
  return "";
}

std::vector<double> ropeInverseFrequencies(const RopeScaling& s, double theta, int64_t dim,
                                           int64_t maxPositions) {
  std::vector<double> f = defaultFrequencies(theta, dim);
  const size_t pairs = f.size();
  if (s.type == "linear") {
    for (double& v : f) v = static_cast<float>(v / s.factor);
  } else if (s.type == "llama3") {
    // Wavelengths longer than original/low are stretched by the factor, shorter than
    // original/high kept, and those between blended.
    const double original = static_cast<double>(s.originalMaxPositions);
    const double lowWavelength = original / s.lowFreqFactor;
    const double highWavelength = original / s.highFreqFactor;
    for (double& v : f) {
      const double wavelength = 2 * kPi / v;
      if (wavelength > lowWavelength) {
        v = v / s.factor;
      } else if (wavelength >= highWavelength) {
        const double smooth =
            (original / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        v = (1 - smooth) * v / s.factor + smooth * v;
      }
      v = static_cast<float>(v);
    }
  } else if (s.type == "yarn") {
    // Pairs that turn fewer than beta_slow times over the context are interpolated, more than
    // beta_fast extrapolated, a linear ramp between.
    const double positions = static_cast<double>(maxPositions);
    auto correctionDim = [&](double rotations) {
      return dim * std::log(positions / (rotations * 2 * kPi)) / (2 * std::log(theta));
    };
    double low = std::max(std::floor(correctionDim(s.betaFast)), 0.0);
    double high = std::min(std::ceil(correctionDim(s.betaSlow)), static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (size_t i = 0; i < pairs; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1 - ramp;
      const double base = std::pow(theta, static_cast<double>(2 * i) / dim);
      f[i] = static_cast<float>((1 / (s.factor * base)) * (1 - extrapolation) +
                                (1 / base) * extrapolation);
    }
  } else if (s.type == "longrope") {
    // LlamaRotaryEmbedding computes it once: the long factors where the model's positions
    // extend the original ones.
    const bool extended =
        s.originalMaxPositions > 0 ? maxPositions > s.originalMaxPositions : s.factor > 1.0;
    const std::vector<double>& factors = extended ? s.longFactor : s.shortFactor;
    for (size_t i = 0; i < pairs; ++i)
      f[i] = static_cast<float>(1.0 /
                                (factors[i] * std::pow(theta, static_cast<double>(2 * i) / dim)));
  }
  return f;
}

double ropeAttentionFactor(const RopeScaling& s, int64_t maxPositions) {
  if (s.attentionFactor >= 0 && (s.type == "yarn" || s.type == "longrope"))
    return s.attentionFactor;
  if (s.type == "yarn") return 0.1 * std::log(s.factor) + 1.0;
  if (s.type == "longrope") {
    const double original =
        static_cast<double>(s.originalMaxPositions > 0 ? s.originalMaxPositions : maxPositions);
    const double factor =
        s.originalMaxPositions > 0 ? static_cast<double>(maxPositions) / original : s.factor;
    return factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original));
  }
  return 1.0;
}

void ropeTables(const std::vector<double>& inverse, int64_t positions, double factor,
                std::vector<float>& cosines, std::vector<float>& sines) {
  const int64_t half = static_cast<int64_t>(inverse.size()), dim = 2 * half;
  cosines.assign(static_cast<size_t>(positions * dim), 0.0f);
  sines.assign(static_cast<size_t>(positions * dim), 0.0f);
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * static_cast<float>(inverse[i]);
      const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
      for (int64_t column : {i, i + half}) {
        cosines[t * dim + column] = factor == 1.0 ? c : static_cast<float>(c * factor);
        sines[t * dim + column] = factor == 1.0 ? s : static_cast<float>(s * factor);
      }
    }
}

}  // namespace dtc::zoo
