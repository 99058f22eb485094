#include "io/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

namespace dtc::io {
namespace {

Json parseOk(const std::string& text) {
  auto parsed = parseJson(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status().message();
  return parsed.ok() ? parsed.value() : Json();
}

TEST(Json, ParsesEveryKind) {
  Json j = parseOk(
      " {\"n\": null, \"t\": true, \"f\": false, \"i\": -42, \"d\": 2.5e-3, \"s\": \"hi\","
      " \"a\": [1, [2], {}], \"o\": {\"k\": \"v\"}} \n");
  ASSERT_TRUE(j.isObject());
  EXPECT_EQ(j.size(), 8u);
  EXPECT_TRUE(j.find("n")->isNull());
  EXPECT_TRUE(j.find("t")->asBool());
  EXPECT_TRUE(j.find("f")->isBool());
  EXPECT_FALSE(j.find("f")->asBool());
  EXPECT_TRUE(j.find("i")->isInteger());
  EXPECT_EQ(j.find("i")->asInt(), -42);
  EXPECT_FALSE(j.find("d")->isInteger());
  EXPECT_DOUBLE_EQ(j.find("d")->asDouble(), 2.5e-3);
  EXPECT_EQ(j.find("s")->asString(), "hi");
  ASSERT_EQ(j.find("a")->size(), 3u);
  EXPECT_EQ(j.find("a")->asArray()[1].asArray()[0].asInt(), 2);
  EXPECT_EQ(j.find("o")->find("k")->asString(), "v");
  EXPECT_EQ(j.find("missing"), nullptr);
  // Members keep their order.
  EXPECT_EQ(j.members()[0].first, "n");
  EXPECT_EQ(j.members()[7].first, "o");
}

TEST(Json, IntegersStayExact) {
  Json j = parseOk("[9007199254740993, -9223372036854775808, 9223372036854775808, 1e2, 1.0]");
  EXPECT_EQ(j.asArray()[0].asInt(), 9007199254740993LL);  // 2^53 + 1: not a double
  EXPECT_EQ(j.asArray()[1].asInt(), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(j.asArray()[2].isInteger());  // beyond int64: a double
  EXPECT_DOUBLE_EQ(j.asArray()[2].asDouble(), 9223372036854775808.0);
  EXPECT_FALSE(j.asArray()[3].isInteger());
  EXPECT_FALSE(j.asArray()[4].isInteger());
  EXPECT_EQ(Json(uint64_t{1} << 63).isInteger(), false);
  EXPECT_EQ(Json(size_t{12}).dump(), "12");
}

TEST(Json, StringEscapes) {
  Json j = parseOk(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")");
  EXPECT_EQ(j.asString(), "a\"b\\c/d\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(Json("q\"\\\n\x01 \xc3\xa9").dump(), "\"q\\\"\\\\\\n\\u0001 \xc3\xa9\"");
  EXPECT_EQ(jsonQuote("tab\there"), "\"tab\\there\"");
}

TEST(Json, DumpIsCompactAndRoundTrips) {
  Json j = Json::object();
  j.set("step", 3);
  j.set("loss", 0.1);
  j.set("ok", true);
  j.set("none", nullptr);
  j.set("name", "mlp");
  Json shape{Json::Array{}};
  shape.push(2);
  shape.push(int64_t{3});
  j.set("shape", std::move(shape));
  j.set("step", 4);  // replaces in place
  EXPECT_EQ(j.dump(),
            "{\"step\":4,\"loss\":0.1,\"ok\":true,\"none\":null,\"name\":\"mlp\",\"shape\":[2,3]}");
  EXPECT_EQ(parseOk(j.dump()), j);
  for (double d : {0.0, -1.5, 1e300, 3.141592653589793, 1.0 / 3.0, 5e-324, 123456789.0}) {
    Json back = parseOk(Json(d).dump());
    EXPECT_EQ(back.asDouble(), d) << Json(d).dump();
  }
  EXPECT_EQ(Json(std::nan("")).dump(), "null");
  EXPECT_EQ(Json(-std::numeric_limits<double>::infinity()).dump(), "null");
  EXPECT_EQ(Json(Json::Array{}).dump(), "[]");
  EXPECT_EQ(Json::object().dump(), "{}");
  EXPECT_EQ(Json().dump(), "null");
}

TEST(Json, WrongTypeAccessorsAreHarmless) {
  Json j = parseOk("[1]");
  EXPECT_EQ(j.asString(), "");
  EXPECT_EQ(j.find("x"), nullptr);
  EXPECT_TRUE(j.members().empty());
  EXPECT_EQ(Json("s").asInt(), 0);
  EXPECT_TRUE(Json(1).asArray().empty());
}

TEST(Json, RejectsMalformedText) {
  const char* bad[] = {
      "",
      " ",
      "{",
      "}",
      "[1,]",
      "[1 2]",
      "{\"a\"}",
      "{\"a\":}",
      "{a:1}",
      "{\"a\":1,}",
      "'s'",
      "\"unterminated",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"a\nb\"",
      "01",
      "1.",
      ".5",
      "-",
      "1e",
      "+1",
      "tru",
      "nul",
      "NaN",
      "Infinity",
      "1 2",
      "{} x",
      "1e999",
      "{\"a\":1,\"a\":2}",
  };
  for (const char* text : bad) {
    auto parsed = parseJson(text);
    EXPECT_FALSE(parsed.ok()) << "accepted: " << text;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidInput);
      EXPECT_EQ(parsed.status().message().rfind("JSON error at byte ", 0), 0u);
    }
  }
}

TEST(Json, DeepNestingIsRejectedNotACrash) {
  EXPECT_TRUE(parseJson(std::string(200, '[') + std::string(200, ']')).ok());
  auto deep = parseJson(std::string(100000, '['));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 256"), std::string::npos);
}

TEST(Json, GarbageNeverCrashes) {
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]:,\"\\ u0123456789.eE+-truefalsn";
  for (int trial = 0; trial < 5000; ++trial) {
    std::string text(rng() % 24, ' ');
    for (char& c : text) c = trial % 2 ? alphabet[rng() % alphabet.size()] : char(rng());
    auto parsed = parseJson(text);
    if (parsed.ok()) {
      EXPECT_EQ(parseOk(parsed->dump()), parsed.value());
    }
  }
}

}  // namespace
}  // namespace dtc::io
