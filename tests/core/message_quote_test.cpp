// quoteForMessage: input quoted in messages stays bounded, printable and valid UTF-8.
#include "core/message_quote.h"

#include <gtest/gtest.h>

#include <string>

using gpumem::quoteForMessage;

TEST(MessageQuote, KeepsShortPrintableTextAsIs)
{
    EXPECT_EQ(quoteForMessage("0x7f00 alloc"), "0x7f00 alloc");
    EXPECT_EQ(quoteForMessage("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
    EXPECT_EQ(quoteForMessage(""), "");
}

TEST(MessageQuote, CutsLongInputAtACharacterBoundary)
{
    const std::string big(20 * 1024 * 1024, 'a');
    EXPECT_EQ(quoteForMessage(big), std::string(120, 'a') + "\xE2\x80\xA6");
    // 119 ASCII bytes then a 2-byte é: the é would end at byte 121, so it is left out.
    EXPECT_EQ(quoteForMessage(std::string(119, 'b') + "\xC3\xA9"), std::string(119, 'b') + "\xE2\x80\xA6");
    EXPECT_EQ(quoteForMessage(std::string(120, 'c')), std::string(120, 'c'));
    EXPECT_EQ(quoteForMessage("abcdef", 3), "abc\xE2\x80\xA6");
}

TEST(MessageQuote, EscapesControlBytesAndReplacesInvalidUtf8)
{
    EXPECT_EQ(quoteForMessage(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(quoteForMessage("line\nnext\x1b[31m\x7f"), "line\\x0anext\\x1b[31m\\x7f");
    // A lone continuation byte, a cut sequence, an overlong '/', a surrogate: one U+FFFD per byte.
    EXPECT_EQ(quoteForMessage("x\x80y"), "x\xEF\xBF\xBDy");
    EXPECT_EQ(quoteForMessage("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(quoteForMessage("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(quoteForMessage("\xED\xA0\x80").size(), 9u);
}

TEST(MessageQuote, FindsTheFirstInvalidUtf8Byte)
{
    using gpumem::firstInvalidUtf8;
    EXPECT_EQ(firstInvalidUtf8(""), 0u);
    EXPECT_EQ(firstInvalidUtf8("caf\xC3\xA9 \xF0\x9F\x98\x80"), 10u); // valid: the size
    EXPECT_EQ(firstInvalidUtf8("[\"\xff\"]"), 2u);
    EXPECT_EQ(firstInvalidUtf8("ab\xC3\xA9\xE2\x82"), 4u); // a sequence cut by the end
    EXPECT_EQ(firstInvalidUtf8("x\xED\xA0\x80"), 1u); // a surrogate
}

// Bidi controls were printed raw: U+202E (RIGHT-TO-LEFT OVERRIDE) in a frame name reversed the rest of
// the message on a terminal.
TEST(MessageQuote, EscapesBidiControls)
{
    EXPECT_EQ(quoteForMessage("a\xE2\x80\xAE" "cod.exe"), "a\\u202ecod.exe"); // U+202E
    EXPECT_EQ(quoteForMessage("\xE2\x80\x8E\xE2\x80\x8F"), "\\u200e\\u200f"); // LRM, RLM
    EXPECT_EQ(quoteForMessage("\xE2\x80\xAA|\xE2\x80\xAD|\xE2\x81\xA6|\xE2\x81\xA9"), "\\u202a|\\u202d|\\u2066|\\u2069");
    // The line and paragraph separators and the C1 controls (NEL) break a message's one line too.
    EXPECT_EQ(quoteForMessage("a\xE2\x80\xA8" "b\xE2\x80\xA9" "c\xC2\x85" "d\xC2\x9F"), "a\\u2028b\\u2029c\\u0085d\\u009f");
    // Neighbours stay as they are: U+202F, U+2065, U+206A, U+200D (zero-width joiner, part of emoji
    // sequences), U+00A0 (no-break space), U+00E9.
    for (const char* kept : { "\xE2\x80\xAF", "\xE2\x81\xA5", "\xE2\x81\xAA", "\xE2\x80\x8D", "\xC2\xA0", "\xC3\xA9" })
        EXPECT_EQ(quoteForMessage(kept), kept);
    // The escape counts as its 3 input bytes against the bound.
    EXPECT_EQ(quoteForMessage("ab\xE2\x80\xAE", 4), "ab\xE2\x80\xA6");
    EXPECT_EQ(quoteForMessage("ab\xE2\x80\xAE", 5), "ab\\u202e");
}

// textForTerminal (brief tx item 1): the one escape of every name, label, path and echoed value a text
// output prints: what quoteForMessage escapes, the same way, but never cut.
TEST(TerminalText, EscapesWhatMessagesEscapeAndCutsNothing)
{
    using gpumem::textForTerminal;
    EXPECT_EQ(textForTerminal("GPU\xE2\x80\xAE" "evil\nforged\r\x1b[2K\xC2\x85|\xE2\x80\xA8|\xE2\x80\xA9"),
        "GPU\\u202eevil\\x0aforged\\x0d\\x1b[2K\\u0085|\\u2028|\\u2029");
    EXPECT_EQ(textForTerminal("x\x80y"), "x\xEF\xBF\xBDy");
    EXPECT_EQ(textForTerminal("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");
    const std::string longName(500, 'n');
    EXPECT_EQ(textForTerminal(longName + "\t"), longName + "\\x09");
    // Escaping a message twice changes nothing (messageForTerminal); textForTerminal doubles the
    // backslashes of an escaped text, so that each printed form maps back to one name (brief esc item 1).
    const std::string once = textForTerminal("a\xE2\x80\xAE\x1b");
    EXPECT_EQ(gpumem::messageForTerminal(once), once);
    EXPECT_EQ(textForTerminal(once), "a\\\\u202e\\\\x1b");
    EXPECT_EQ(gpumem::messageForTerminal("bad \\x0a in f.json\n"), "bad \\x0a in f.json\\x0a");
    EXPECT_EQ(quoteForMessage(std::string(200, 'q') + "\xE2\x80\xAE", 1000), std::string(200, 'q') + "\\u202e");
}

// brief esc item 1: a literal backslash is doubled, so the text "a\x0ab" and "a<LF>b" print differently.
TEST(TextForTerminal, EscapesBackslashSoEscapesAreUnambiguous)
{
    using gpumem::textForTerminal;
    EXPECT_EQ(textForTerminal("a\\x0ab"), "a\\\\x0ab");
    EXPECT_EQ(textForTerminal("a\nb"), "a\\x0ab");
    EXPECT_NE(textForTerminal("a\\x0ab"), textForTerminal("a\nb"));
    EXPECT_EQ(textForTerminal("C:\\dir\\"), "C:\\\\dir\\\\");
    // Messages keep a backslash as it is (paths in errors read as typed).
    EXPECT_EQ(gpumem::quoteForMessage("a\\b"), "a\\b");
}
