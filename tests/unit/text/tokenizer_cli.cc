// tokenizer_cli TOKENIZER encode|decode: each line of stdin a JSON string to encode (out: a JSON
// list of ids) or a JSON list of ids to decode (out: a JSON string); errors one line, exit 2.
#include <cstdio>
#include <iostream>
#include <string>

#include "io/json.h"
#include "text/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tokenizer_cli TOKENIZER encode|decode\n");
    return 2;
  }
  auto tokenizer = dtc::text::Tokenizer::load(argv[1]);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "error: %s\n", tokenizer.status().message().c_str());
    return 2;
  }
  const std::string mode = argv[2];
  std::string line;
  while (std::getline(std::cin, line)) {
    auto input = dtc::io::parseJson(line);
    if (!input.ok()) {
      std::fprintf(stderr, "error: %s\n", input.status().message().c_str());
      return 2;
    }
    if (mode == "encode") {
      auto ids = tokenizer->encode(input->asString());
      if (!ids.ok()) {
        std::fprintf(stderr, "error: %s\n", ids.status().message().c_str());
        return 2;
      }
      dtc::io::Json out{dtc::io::Json::Array{}};
      for (int64_t id : *ids) out.push(id);
      std::cout << out.dump() << "\n";
    } else {
      std::vector<int64_t> ids;
      for (const dtc::io::Json& id : input->asArray()) ids.push_back(id.asInt());
      std::cout << dtc::io::jsonQuote(tokenizer->decode(ids)) << "\n";
    }
  }
  return 0;
}
