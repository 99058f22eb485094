#include "perf/device_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "ops/device_kind.h"
#include "perf/shipped_profiles.h"

namespace dtc::perf {
namespace {

constexpr const char* kFormat = "dtc-device-profile";
constexpr int64_t kVersion = 1;
constexpr size_t kMaxProfileBytes = 1 << 20;

const char* typeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kF8E4M3: return "fp8";  // FP8 GEMMs, of either format
    case DType::kF8E5M2: return "fp8e5m2";
  }
  return "?";
}

bool parseType(const std::string& s, DType& t) {
  for (DType c : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3})
    if (s == typeName(c)) {
      t = c;
      return true;
    }
  return false;
}

Status bad(const std::string& origin, const std::string& what) {
  return Status::InvalidInput("device profile " + origin + ": " + what);
}

StatusOr<double> positive(const io::Json& j, const char* key, const std::string& origin,
                          bool zeroAllowed = false) {
  const io::Json* v = j.find(key);
  if (!v || !v->isNumber() || !std::isfinite(v->asDouble()) || v->asDouble() < 0 ||
      (!zeroAllowed && v->asDouble() == 0))
    return bad(origin, std::string("'") + key + "' must be a " +
                           (zeroAllowed ? "non-negative" : "positive") + " number");
  return v->asDouble();
}

StatusOr<Link> linkFrom(const io::Json& j, const char* key, const std::string& origin) {
  const io::Json* l = j.find(key);
  if (!l || !l->isObject()) return bad(origin, std::string("'") + key + "' must be an object");
  Link link;
  DTC_ASSIGN_OR_RETURN(link.latencySeconds, positive(*l, "latency_s", origin + " " + key, true));
  DTC_ASSIGN_OR_RETURN(link.bytesPerSecond, positive(*l, "bytes_per_s", origin + " " + key));
  for (auto [field, value] :
       {std::pair{"reduce_scatter_bytes_per_s", &link.reduceScatterBytesPerSecond},
        std::pair{"all_gather_bytes_per_s", &link.allGatherBytesPerSecond}})
    if (l->find(field)) {
      DTC_ASSIGN_OR_RETURN(*value, positive(*l, field, origin + " " + key));
    }
  return link;
}

io::Json linkJson(const Link& l) {
  io::Json j = io::Json::object();
  j.set("latency_s", l.latencySeconds);
  j.set("bytes_per_s", l.bytesPerSecond);
  if (l.reduceScatterBytesPerSecond > 0)
    j.set("reduce_scatter_bytes_per_s", l.reduceScatterBytesPerSecond);
  if (l.allGatherBytesPerSecond > 0) j.set("all_gather_bytes_per_s", l.allGatherBytesPerSecond);
  return j;
}

using Curve = std::vector<std::pair<double, double>>;

// A curve's rate at `flops`: interpolated in log(flops) between points, held beyond the ends.
double rateOn(const Curve& c, double flops) {
  if (c.empty()) return 0;
  if (flops <= c.front().first) return c.front().second;
  if (flops >= c.back().first) return c.back().second;
  for (size_t k = 1; k < c.size(); ++k)
    if (flops <= c[k].first) {
      const double x0 = std::log(c[k - 1].first), x1 = std::log(c[k].first);
      const double w = (std::log(flops) - x0) / (x1 - x0);
      return c[k - 1].second + w * (c[k].second - c[k - 1].second);
    }
  return c.back().second;
}

StatusOr<std::vector<std::pair<DType, Curve>>> curvesFrom(const io::Json& g,
                                                          const std::string& name,
                                                          const std::string& origin) {
  if (!g.isObject() || g.size() == 0)
    return bad(origin, "'" + name + "' must map element types to [flops, flop/s] points");
  std::vector<std::pair<DType, Curve>> curves;
  for (const auto& [key, list] : g.members()) {
    DType t;
    if (!parseType(key, t))
      return bad(origin, "unknown element type '" + key + "' (f32, bf16, f16, fp8)");
    if (!list.isArray() || list.size() == 0)
      return bad(origin, "'" + key + "' must list [flops, flop/s] points");
    Curve points;
    for (const io::Json& point : list.asArray()) {
      if (!point.isArray() || point.size() != 2 || !point.asArray()[0].isNumber() ||
          !point.asArray()[1].isNumber() || !(point.asArray()[0].asDouble() > 0) ||
          !(point.asArray()[1].asDouble() > 0) || !std::isfinite(point.asArray()[0].asDouble()) ||
          !std::isfinite(point.asArray()[1].asDouble()))
        return bad(origin, "'" + key + "' points must be [flops > 0, flop/s > 0]");
      if (!points.empty() && point.asArray()[0].asDouble() <= points.back().first)
        return bad(origin, "'" + key + "' points must be in increasing flops");
      points.push_back({point.asArray()[0].asDouble(), point.asArray()[1].asDouble()});
    }
    curves.push_back({t, std::move(points)});
  }
  return curves;
}

io::Json curvesJson(const std::vector<std::pair<DType, Curve>>& curves) {
  io::Json g = io::Json::object();
  for (const auto& [t, points] : curves) {
    io::Json list;
    for (const auto& [f, rate] : points) list.push(io::Json(io::Json::Array{f, rate}));
    g.set(typeName(t), list);
  }
  return g;
}

}  // namespace

namespace {

// FP8 GEMMs run at one rate whichever formats their operands have; a profile without an FP8 curve
// prices them at bf16's (a device that cannot, or was not measured, gains nothing).
DType gemmRateType(DType dtype, const std::vector<std::pair<DType, Curve>>& curves) {
  if (!float8(dtype)) return dtype;
  for (const auto& [t, points] : curves)
    if (t == DType::kF8E4M3) return DType::kF8E4M3;
  return DType::kBF16;
}

}  // namespace

double DeviceProfile::gemmFlopsPerSecond(DType requested, double flops) const {
  const DType dtype = gemmRateType(requested, gemm);
  const Curve* curve = nullptr;
  for (const auto& [t, points] : gemm)
    if (t == dtype) curve = &points;
  if (!curve)  // 16-bit types not measured run as f32 (the CPU widens them); f32 as the first
    for (const auto& [t, points] : gemm)
      if (t == DType::kF32 || !curve) curve = &points;
  return curve ? rateOn(*curve, flops) : 0;
}

double DeviceProfile::attentionFlopsPerSecond(bool grad, DType dtype, double flops,
                                              double headDim) const {
  double factor = 1;
  for (const auto& [t, points] : grad ? attentionGradHeadDim : attentionHeadDim)
    if (t == dtype) factor = rateOn(points, headDim);
  for (const auto& [t, points] : grad ? attentionGrad : attention)
    if (t == dtype) return rateOn(points, flops) * factor;
  return 0;
}

std::string DeviceProfile::basisNote() const {
  return basis == "datasheet"
             ? " (a datasheet profile: published peaks, assumed efficiencies; dtrun --calibrate "
               "measures a device)"
             : "";
}

double DeviceProfile::qkvAttentionFlopsPerSecond(bool grad, DType dtype, double flops,
                                                 double headDim) const {
  for (const auto& [t, points] : grad ? qkvAttentionGrad : qkvAttention)
    if (t == dtype) return rateOn(points, flops);
  return attentionFlopsPerSecond(grad, dtype, flops, headDim);
}

double DeviceProfile::peakFlopsPerSecond(DType requested) const {
  const DType dtype = gemmRateType(requested, gemm);
  for (const auto& [t, flops] : this->peak)
    if (t == dtype) return flops;
  double peak = 0;
  for (const auto& [t, points] : gemm)
    if (t == dtype)
      for (const auto& p : points) peak = std::max(peak, p.second);
  return peak > 0 ? peak : gemmFlopsPerSecond(dtype, 1e30);
}

double DeviceProfile::secondsPerElement(const std::string& kernel) const {
  for (const auto& [name, s] : elementSeconds)
    if (name == kernel) return s;
  return 0;
}

double DeviceProfile::secondsPerElement(const std::string& kernel, DType dtype) const {
  if (dtype == DType::kBF16 || dtype == DType::kF16)
    if (const double s = secondsPerElement(kernel + "@" + typeName(dtype))) return s;
  return secondsPerElement(kernel);
}

io::Json DeviceProfile::toJson() const {
  io::Json j = io::Json::object();
  j.set("format", kFormat);
  j.set("version", kVersion);
  j.set("name", name);
  j.set("source", source);
  if (!basis.empty()) j.set("basis", basis);
  j.set("device", device);
  j.set("gemm_flops_per_s", curvesJson(gemm));
  if (!attention.empty()) j.set("attention_flops_per_s", curvesJson(attention));
  if (!attentionGrad.empty()) j.set("attention_grad_flops_per_s", curvesJson(attentionGrad));
  if (!attentionHeadDim.empty()) j.set("attention_head_dim_factor", curvesJson(attentionHeadDim));
  if (!attentionGradHeadDim.empty())
    j.set("attention_grad_head_dim_factor", curvesJson(attentionGradHeadDim));
  if (!qkvAttention.empty()) j.set("qkv_attention_flops_per_s", curvesJson(qkvAttention));
  if (!qkvAttentionGrad.empty())
    j.set("qkv_attention_grad_flops_per_s", curvesJson(qkvAttentionGrad));
  if (!peak.empty()) {
    io::Json e = io::Json::object();
    for (const auto& [t, flops] : peak) e.set(typeName(t), flops);
    j.set("peak_flops_per_s", e);
  }
  j.set("memory_bytes_per_s", memoryBytesPerSecond);
  j.set("kernel_s", kernelSeconds);
  if (!elementSeconds.empty()) {
    io::Json e = io::Json::object();
    for (const auto& [name, s] : elementSeconds) e.set(name, s);
    j.set("element_s", e);
  }
  j.set("intra_node", linkJson(intraNode));
  j.set("inter_node", linkJson(interNode));
  j.set("devices_per_node", devicesPerNode);
  if (deviceMemoryBytes) j.set("device_memory_bytes", deviceMemoryBytes);
  return j;
}

StatusOr<DeviceProfile> DeviceProfile::fromJson(const io::Json& j, const std::string& origin) {
  if (!j.isObject()) return bad(origin, "not a JSON object");
  const io::Json* format = j.find("format");
  if (!format || format->asString() != kFormat)
    return bad(origin, std::string("not a device profile (\"format\" is not \"") + kFormat + "\")");
  const io::Json* version = j.find("version");
  if (!version || !version->isInteger() || version->asInt() != kVersion)
    return bad(origin, "version must be " + std::to_string(kVersion));
  DeviceProfile p;
  if (const io::Json* v = j.find("name")) p.name = v->asString();
  if (const io::Json* v = j.find("source")) p.source = v->asString();
  if (const io::Json* v = j.find("basis")) {
    p.basis = v->asString();
    if (p.basis != "datasheet" && p.basis != "measured")
      return bad(origin, "'basis' must be datasheet or measured");
  }
  const io::Json* device = j.find("device");
  p.device = device ? device->asString() : "";
  if (!findDeviceKind(p.device)) return bad(origin, "'device' must be " + deviceKindNames());
  const io::Json* g = j.find("gemm_flops_per_s");
  if (!g) return bad(origin, "'gemm_flops_per_s' must map element types to [flops, flop/s] points");
  DTC_ASSIGN_OR_RETURN(p.gemm, curvesFrom(*g, "gemm_flops_per_s", origin));
  if (const io::Json* a = j.find("attention_flops_per_s")) {
    DTC_ASSIGN_OR_RETURN(p.attention, curvesFrom(*a, "attention_flops_per_s", origin));
  }
  if (const io::Json* a = j.find("attention_head_dim_factor")) {
    DTC_ASSIGN_OR_RETURN(p.attentionHeadDim, curvesFrom(*a, "attention_head_dim_factor", origin));
  }
  if (const io::Json* a = j.find("attention_grad_head_dim_factor")) {
    DTC_ASSIGN_OR_RETURN(p.attentionGradHeadDim,
                         curvesFrom(*a, "attention_grad_head_dim_factor", origin));
  }
  if (const io::Json* a = j.find("qkv_attention_flops_per_s")) {
    DTC_ASSIGN_OR_RETURN(p.qkvAttention, curvesFrom(*a, "qkv_attention_flops_per_s", origin));
  }
  if (const io::Json* a = j.find("qkv_attention_grad_flops_per_s")) {
    DTC_ASSIGN_OR_RETURN(p.qkvAttentionGrad,
                         curvesFrom(*a, "qkv_attention_grad_flops_per_s", origin));
  }
  if (const io::Json* a = j.find("attention_grad_flops_per_s")) {
    DTC_ASSIGN_OR_RETURN(p.attentionGrad, curvesFrom(*a, "attention_grad_flops_per_s", origin));
  }
  if (const io::Json* e = j.find("peak_flops_per_s")) {
    if (!e->isObject()) return bad(origin, "'peak_flops_per_s' must map element types to FLOP/s");
    for (const auto& [key, v] : e->members()) {
      DType t;
      if (!parseType(key, t))
        return bad(origin, "unknown element type '" + key + "' in 'peak_flops_per_s'");
      if (!v.isNumber() || !(v.asDouble() > 0) || !std::isfinite(v.asDouble()))
        return bad(origin, "peak_flops_per_s '" + key + "' must be a positive number");
      p.peak.push_back({t, v.asDouble()});
    }
    // No kernel runs above the peak, or a plan's utilisation could pass 100%.
    for (const auto& [t, flops] : p.peak)
      for (const auto* curves :
           {&p.gemm, &p.attention, &p.attentionGrad, &p.qkvAttention, &p.qkvAttentionGrad})
        for (const auto& [type, points] : *curves)
          for (const auto& point : points)
            if (type == t && point.second > flops)
              return bad(origin, std::string("peak_flops_per_s '") + typeName(t) +
                                     "' is below a curve's rate of that type");
  }
  DTC_ASSIGN_OR_RETURN(p.memoryBytesPerSecond, positive(j, "memory_bytes_per_s", origin));
  DTC_ASSIGN_OR_RETURN(p.kernelSeconds, positive(j, "kernel_s", origin, true));
  if (const io::Json* e = j.find("element_s")) {
    if (!e->isObject()) return bad(origin, "'element_s' must map kernel names to seconds");
    for (const auto& [name, v] : e->members()) {
      if (!v.isNumber() || !(v.asDouble() >= 0) || !std::isfinite(v.asDouble()))
        return bad(origin, "element_s '" + name + "' must be a non-negative number");
      p.elementSeconds.push_back({name, v.asDouble()});
    }
  }
  DTC_ASSIGN_OR_RETURN(p.intraNode, linkFrom(j, "intra_node", origin));
  DTC_ASSIGN_OR_RETURN(p.interNode, linkFrom(j, "inter_node", origin));
  const io::Json* perNode = j.find("devices_per_node");
  if (!perNode || !perNode->isInteger() || perNode->asInt() < 1 || perNode->asInt() > (1 << 20))
    return bad(origin, "'devices_per_node' must be a positive integer");
  p.devicesPerNode = static_cast<int>(perNode->asInt());
  if (const io::Json* m = j.find("device_memory_bytes")) {
    if (!m->isInteger() || m->asInt() < 0)
      return bad(origin, "'device_memory_bytes' must be a non-negative integer");
    p.deviceMemoryBytes = static_cast<uint64_t>(m->asInt());
  }
  return p;
}

bool relativeToHeadDim64(std::vector<std::pair<double, double>>& points) {
  double at64 = 0;
  for (const auto& [dim, rate] : points)
    if (dim == 64) at64 = rate;
  if (!(at64 > 0)) return false;
  for (auto& point : points) point.second /= at64;
  return true;
}

void keepNonDecreasing(std::vector<std::pair<double, double>>& curve) {
  for (size_t k = 1; k < curve.size(); ++k)
    curve[k].second = std::max(curve[k].second, curve[k - 1].second);
}

std::vector<std::string> shippedProfiles() {
  std::vector<std::string> names;
  for (const ShippedProfile& s : shippedProfileTexts()) names.push_back(s.name);
  return names;
}

StatusOr<DeviceProfile> loadProfile(const std::string& nameOrPath) {
  for (const ShippedProfile& s : shippedProfileTexts())
    if (nameOrPath == s.name) {
      DTC_ASSIGN_OR_RETURN(io::Json j, io::parseJson(s.text));
      return DeviceProfile::fromJson(j, s.name);
    }
  std::ifstream in(nameOrPath, std::ios::binary);
  if (!in) {
    std::string names;
    for (const std::string& n : shippedProfiles()) names += (names.empty() ? "" : ", ") + n;
    return Status::InvalidInput("--profile " + nameOrPath +
                                ": no such file, nor a shipped profile (" + names + ")");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxProfileBytes)
    return bad(nameOrPath, "larger than a profile can be (1 MiB)");
  StatusOr<io::Json> j = io::parseJson(text.str());
  if (!j.ok()) return bad(nameOrPath, j.status().message());
  return DeviceProfile::fromJson(*j, nameOrPath);
}

}  // namespace dtc::perf
