#include "support/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace dtc {
namespace {

TEST(TerminalText, KeepsUtf8NewlinesAndTabs) {
  const std::string text = "To be,\n\tor not: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  EXPECT_EQ(terminalText(text), text);
}

TEST(TerminalText, EscapesControlBytes) {
  EXPECT_EQ(terminalText(std::string("a\x1b[2Jb\x07\x7f\r", 9)), "a\\x1b[2Jb\\x07\\x7f\\x0d");
  EXPECT_EQ(terminalText(std::string("\0z", 2)), "\\x00z");
}

TEST(TerminalText, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(terminalText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(terminalText("\xc3"), "\\xc3");                    // cut short
  EXPECT_EQ(terminalText("\xc0\xaf"), "\\xc0\\xaf");           // overlong
  EXPECT_EQ(terminalText("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(terminalText("\xe2\x82x"), "\\xe2\\x82x");
}

}  // namespace
}  // namespace dtc
