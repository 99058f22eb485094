#include "text/pretokenize.h"

#include <gtest/gtest.h>

#include "text/unicode.h"

namespace dtc::text {
namespace {

using Pieces = std::vector<std::string>;

TEST(Pretokenize, Gpt2SplitsWordsNumbersPunctuationAndSpaces) {
  EXPECT_EQ(
      splitText("Hello, world! It's 2026  ok\n\nx", SplitPattern::kGpt2),
      (Pieces{"Hello", ",", " world", "!", " It", "'s", " 2026", " ", " ok", "\n", "\n", "x"}));
  // Contractions are lower case only in GPT-2's pattern.
  EXPECT_EQ(splitText("IT'S", SplitPattern::kGpt2), (Pieces{"IT", "'", "S"}));
  // Trailing white space is one piece; a space before a word joins it.
  EXPECT_EQ(splitText("a   ", SplitPattern::kGpt2), (Pieces{"a", "   "}));
  EXPECT_EQ(splitText("a   b", SplitPattern::kGpt2), (Pieces{"a", "  ", " b"}));
}

TEST(Pretokenize, Llama3GroupsDigitsInThreesAndKeepsLineBreaks) {
  EXPECT_EQ(splitText("12345 apples", SplitPattern::kLlama3), (Pieces{"123", "45", " apples"}));
  EXPECT_EQ(splitText("12345", SplitPattern::kQwen2), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(splitText("IT'S (ok)\n\n  next", SplitPattern::kLlama3),
            (Pieces{"IT", "'S", " (", "ok", ")\n\n", " ", " next"}));
  EXPECT_EQ(splitText("a \n b", SplitPattern::kLlama3), (Pieces{"a", " \n", " b"}));
}

TEST(Pretokenize, NonAsciiLettersStayInWords) {
  EXPECT_EQ(splitText("naïve café — ok", SplitPattern::kGpt2),
            (Pieces{"naïve", " café", " —", " ok"}));
  EXPECT_TRUE(isLetter(0x4E2D));   // 中
  EXPECT_FALSE(isLetter(0x2014));  // —
  EXPECT_TRUE(isNumber(0x0663));   // Arabic-Indic three
  EXPECT_TRUE(isSpace(0x3000));
}

TEST(Pretokenize, PiecesJoinToTheText) {
  const std::string text = "Mixed 中文 text, 12 digits\t\r\n and émoji 🙂 end  ";
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    std::string joined;
    for (const std::string& piece : splitText(text, p)) joined += piece;
    EXPECT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace dtc::text
