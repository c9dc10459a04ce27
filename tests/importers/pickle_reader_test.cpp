// Tests of the plain-data unpickler with tiny pickles written by CPython 3 (pickle.dumps) and by hand.
#include "importers/pickle_reader.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>

using namespace gpumem;

namespace {

// pickle.dumps({'a':[1,2.5,'x',None,True,(3,4)],'c':2**70,'d':-5,'e':-2**40,'f':2**63-1,
//               'g':(),'h':(1,),'i':(1,2,3),'j':[]}, protocol=2)
const std::string kProtocol2("\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x47\x40"
                             "\x04\x00\x00\x00\x00\x00\x00"
                             "\x58\x01\x00\x00\x00\x78\x71\x03\x4e\x88\x4b\x03\x4b\x04\x86\x71\x04\x65\x58\x01\x00\x00"
                             "\x00\x63\x71\x05\x8a\x09\x00"
                             "\x00\x00\x00\x00\x00\x00\x00\x40\x58\x01\x00\x00\x00\x64\x71\x06\x4a\xfb\xff\xff\xff\x58"
                             "\x01\x00\x00\x00\x65\x71\x07"
                             "\x8a\x06\x00\x00\x00\x00\x00\xff\x58\x01\x00\x00\x00\x66\x71\x08\x8a\x08\xff\xff\xff\xff"
                             "\xff\xff\xff\x7f\x58\x01\x00"
                             "\x00\x00\x67\x71\x09\x29\x58\x01\x00\x00\x00\x68\x71\x0a\x4b\x01\x85\x71\x0b\x58\x01\x00"
                             "\x00\x00\x69\x71\x0c\x4b\x01"
                             "\x4b\x02\x4b\x03\x87\x71\x0d\x58\x01\x00\x00\x00\x6a\x71\x0e\x5d\x71\x0f\x75\x2e",
    165);

// pickle.dumps({'a':[1,2.5,'x',None,True,(3,4)],'b':b'hi','c':2**70,'d':-5,'e':-2**40,'f':2**63-1,
//               's':frozenset()}, protocol=4)
const std::string kProtocol4(
    "\x80\x04\x95\x66\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x47\x40\x04\x00\x00"
    "\x00"
    "\x00\x00\x00\x8c\x01\x78\x94\x4e\x88\x4b\x03\x4b\x04\x86\x94\x65\x8c\x01\x62\x94\x43\x02\x68\x69\x94\x8c\x01\x63"
    "\x94"
    "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40\x8c\x01\x64\x94\x4a\xfb\xff\xff\xff\x8c\x01\x65\x94\x8a\x06\x00\x00"
    "\x00"
    "\x00\x00\xff\x8c\x01\x66\x94\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8c\x01\x73\x94\x28\x91\x94\x75\x2e",
    113);

std::string withProtocol(std::string bytes, char proto)
{
    bytes[1] = proto;
    return bytes;
}

void expectCommonValues(const PickleDocument& doc)
{
    const PickleValue& root = doc.root();
    ASSERT_EQ(root.kind, PickleKind::Dict);
    const PickleValue* a = doc.find(root, "a");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->kind, PickleKind::List);
    auto items = doc.items(*a);
    ASSERT_EQ(items.size(), 6u);
    EXPECT_EQ(doc.toInt(items[0]), 1);
    EXPECT_EQ(doc.toFloat(items[1]), 2.5);
    EXPECT_EQ(items[1].kind, PickleKind::Float);
    EXPECT_EQ(doc.text(items[2]), "x");
    EXPECT_EQ(items[3].kind, PickleKind::None);
    EXPECT_EQ(items[4].kind, PickleKind::Bool);
    EXPECT_EQ(doc.toInt(items[4]), 1);
    ASSERT_EQ(items[5].kind, PickleKind::Tuple);
    EXPECT_EQ(doc.toInt(doc.items(items[5])[1]), 4);
    EXPECT_EQ(doc.find(root, "c")->kind, PickleKind::BigInt); // 2**70 does not fit: clamped
    EXPECT_EQ(doc.toInt(*doc.find(root, "c")), INT64_MAX);
    EXPECT_EQ(doc.toInt(*doc.find(root, "d")), -5);
    EXPECT_EQ(doc.toInt(*doc.find(root, "e")), -(std::int64_t(1) << 40));
    EXPECT_EQ(doc.find(root, "f")->kind, PickleKind::Int);
    EXPECT_EQ(doc.toInt(*doc.find(root, "f")), INT64_MAX);
    EXPECT_EQ(doc.find(root, "missing"), nullptr);
}

std::string errorOf(const std::string& bytes)
{
    try {
        PickleDocument::parse(bytes, "t.pickle");
    } catch (const FormatError& e) {
        return e.what();
    }
    return "no error";
}

} // namespace

TEST(PickleReader, ReadsPlainDataOfProtocol2)
{
    PickleDocument doc = PickleDocument::parse(kProtocol2, "p2.pickle");
    EXPECT_EQ(doc.protocol(), 2);
    expectCommonValues(doc);
    EXPECT_EQ(doc.items(*doc.find(doc.root(), "g")).size(), 0u);
    EXPECT_EQ(doc.find(doc.root(), "g")->kind, PickleKind::Tuple);
    EXPECT_EQ(doc.items(*doc.find(doc.root(), "h")).size(), 1u);
    EXPECT_EQ(doc.items(*doc.find(doc.root(), "i")).size(), 3u);
    EXPECT_EQ(doc.toInt(doc.items(*doc.find(doc.root(), "i"))[2]), 3);
    EXPECT_EQ(doc.find(doc.root(), "j")->kind, PickleKind::List);
}

TEST(PickleReader, ReadsPlainDataOfProtocols4And5WithFramesBytesAndFrozenset)
{
    for (char proto : { '\x04', '\x05' }) {
        PickleDocument doc = PickleDocument::parse(withProtocol(kProtocol4, proto), "p4.pickle");
        EXPECT_EQ(doc.protocol(), proto);
        expectCommonValues(doc);
        const PickleValue* b = doc.find(doc.root(), "b");
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(b->kind, PickleKind::Binary);
        EXPECT_EQ(doc.text(*b), "hi");
        EXPECT_EQ(doc.find(doc.root(), "s")->kind, PickleKind::Set);
    }
}

TEST(PickleReader, MemoGetSharesTheSameContainer)
{
    // pickle.dumps({'x': shared, 'y': shared}) with shared = [1]
    const std::string bytes(
        "\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x78\x94\x5d\x94\x4b\x01\x61\x8c\x01"
        "\x79\x94\x68\x02\x75\x2e",
        31);
    PickleDocument doc = PickleDocument::parse(bytes, "shared.pickle");
    const PickleValue* x = doc.find(doc.root(), "x");
    const PickleValue* y = doc.find(doc.root(), "y");
    ASSERT_TRUE(x && y);
    EXPECT_EQ(x->bits, y->bits); // one container
    EXPECT_EQ(doc.toJson(doc.root()), nlohmann::json::parse(R"({"x":[1],"y":[1]})"));
}

TEST(PickleReader, ConvertsToJson)
{
    PickleDocument doc = PickleDocument::parse(kProtocol2, "p2.pickle");
    nlohmann::json j = doc.toJson(doc.root());
    EXPECT_EQ(j["a"], nlohmann::json::parse(R"([1, 2.5, "x", null, true, [3, 4]])"));
    EXPECT_EQ(j["d"], -5);
}

TEST(PickleReader, RefusesGlobalWithOpcodeAndOffset)
{
    // pickle.dumps(os.system, protocol=2): PROTO 2, GLOBAL 'posix system' at offset 2.
    const std::string bytes("\x80\x02\x63\x70\x6f\x73\x69\x78\x0a\x73\x79\x73\x74\x65\x6d\x0a\x71\x00\x2e", 19);
    EXPECT_EQ(errorOf(bytes),
        "t.pickle: pickle opcode GLOBAL (0x63) at byte offset 2 is not allowed: gpumem reads only plain-data pickles "
        "and "
        "never runs code from them");
}

TEST(PickleReader, RefusesStackGlobalAndReduce)
{
    // pickle.dumps(C(), protocol=4) for a class C: STACK_GLOBAL at offset 26.
    const std::string obj(
        "\x80\x04\x95\x15\x00\x00\x00\x00\x00\x00\x00\x8c\x08\x5f\x5f\x6d\x61\x69\x6e\x5f\x5f\x94\x8c\x01\x43"
        "\x94\x93\x94\x29\x81\x94\x2e",
        32);
    EXPECT_NE(
        errorOf(obj).find("pickle opcode STACK_GLOBAL (0x93) at byte offset 26 is not allowed"), std::string::npos);
    // Hand-made: PROTO 2, EMPTY_TUPLE, EMPTY_TUPLE, REDUCE at offset 4.
    const std::string reduce("\x80\x02\x29\x29\x52\x2e", 6);
    EXPECT_NE(errorOf(reduce).find("pickle opcode REDUCE (0x52) at byte offset 4 is not allowed"), std::string::npos);
    const std::string build("\x80\x02\x7d\x7d\x62\x2e", 6);
    EXPECT_NE(errorOf(build).find("pickle opcode BUILD (0x62) at byte offset 4"), std::string::npos);
    const std::string ext("\x80\x02\x82\x01\x2e", 5);
    EXPECT_NE(errorOf(ext).find("pickle opcode EXT1 (0x82) at byte offset 2"), std::string::npos);
}

namespace {
// The same dict as kProtocol2 plus 'u': '\u00e9\\\n\u20ac\U0001f600', by pickle.dumps(d, protocol=0) and
// protocol=1: no PROTO; ints beyond 32 bits as LONG text, True as "I01", floats as FLOAT text (protocol
// 0), str as UNICODE in raw-unicode-escape (protocol 0: é as the byte 0xe9, the rest as \u escapes).
const std::string kProtocol0("(dp0\nVa\np1\n(lp2\nI1\naF2.5\naVx\np3\naNaI01\na(I3\nI4\ntp4\nasVc\np5\n"
                             "L1180591620717411303424L\nsVd\np6\nI-5\nsVe\np7\nL-1099511627776L\nsVf\np8\n"
                             "L9223372036854775807L\nsVg\np9\n(tsVh\np10\n(I1\ntp11\nsVi\np12\n(I1\nI2\nI3\ntp13\n"
                             "sVj\np14\n(lp15\nsVu\np16\nV\xe9\\u005c\\u000a\\u20ac\\U0001f600\np17\ns.");
const std::string kProtocol1(
    "\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x47\x40\x04\x00\x00\x00\x00\x00\x00\x58"
    "\x01\x00\x00\x00\x78\x71\x03\x4e\x49\x30\x31\x0a\x28\x4b\x03\x4b\x04\x74\x71\x04\x65\x58\x01\x00\x00\x00\x63\x71"
    "\x05\x4c\x31\x31\x38\x30\x35\x39\x31\x36\x32\x30\x37\x31\x37\x34\x31\x31\x33\x30\x33\x34\x32\x34\x4c\x0a\x58\x01"
    "\x00\x00\x00\x64\x71\x06\x4a\xfb\xff\xff\xff\x58\x01\x00\x00\x00\x65\x71\x07\x4c\x2d\x31\x30\x39\x39\x35\x31\x31"
    "\x36\x32\x37\x37\x37\x36\x4c\x0a\x58\x01\x00\x00\x00\x66\x71\x08\x4c\x39\x32\x32\x33\x33\x37\x32\x30\x33\x36\x38"
    "\x35\x34\x37\x37\x35\x38\x30\x37\x4c\x0a\x58\x01\x00\x00\x00\x67\x71\x09\x29\x58\x01\x00\x00\x00\x68\x71\x0a\x28"
    "\x4b\x01\x74\x71\x0b\x58\x01\x00\x00\x00\x69\x71\x0c\x28\x4b\x01\x4b\x02\x4b\x03\x74\x71\x0d\x58\x01\x00\x00\x00"
    "\x6a\x71\x0e\x5d\x71\x0f\x58\x01\x00\x00\x00\x75\x71\x10\x58\x0b\x00\x00\x00\xc3\xa9\x5c\x0a\xe2\x82\xac\xf0\x9f"
    "\x98\x80\x71\x11\x75\x2e",
    230);
} // namespace

TEST(PickleReader, ReadsPlainDataOfProtocols0And1)
{
    ASSERT_EQ(kProtocol0.size(), 256u);
    for (const std::string* bytes : { &kProtocol0, &kProtocol1 }) {
        SCOPED_TRACE(bytes == &kProtocol0 ? "protocol 0" : "protocol 1");
        PickleDocument doc = PickleDocument::parse(*bytes, "p01.pickle");
        EXPECT_EQ(doc.protocol(), 0); // no PROTO opcode
        expectCommonValues(doc);
        EXPECT_EQ(doc.find(doc.root(), "g")->kind, PickleKind::Tuple);
        EXPECT_EQ(doc.toInt(doc.items(*doc.find(doc.root(), "i"))[2]), 3);
        EXPECT_EQ(doc.find(doc.root(), "j")->kind, PickleKind::List);
        const PickleValue* u = doc.find(doc.root(), "u");
        ASSERT_NE(u, nullptr);
        EXPECT_EQ(u->kind, PickleKind::Str);
        EXPECT_EQ(doc.text(*u), "\xc3\xa9\\\n\xe2\x82\xac\xf0\x9f\x98\x80"); // é \ newline € 😀 in UTF-8
        EXPECT_EQ(doc.toJson(doc.root())["a"], nlohmann::json::parse(R"([1, 2.5, "x", null, true, [3, 4]])"));
    }
}

TEST(PickleReader, ReadsTheTextOpcodesOfProtocol0)
{
    // Python 2's STRING with its escapes (bytes, as SHORT_BINSTRING), INT's "00" (False), a LONG without
    // the trailing L, FLOAT's -inf, memo PUT/GET of the decoded text, DUP and POP.
    const std::string bytes("(lp0\nS'a\\x41\\n\\'\\101\\q'\np1\naI00\naL-9223372036854775808\naF-inf\nag1\naS\"plain\"\n"
                            "a2I7\na0V\\u00e9\na.");
    PickleDocument doc = PickleDocument::parse(bytes, "p0.pickle");
    const auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 8u);
    EXPECT_EQ(items[0].kind, PickleKind::Binary);
    EXPECT_EQ(doc.text(items[0]), "aA\n'A\\q");
    EXPECT_EQ(items[1].kind, PickleKind::Bool);
    EXPECT_EQ(doc.toInt(items[1]), 0);
    EXPECT_EQ(items[2].kind, PickleKind::Int);
    EXPECT_EQ(doc.toInt(items[2]), std::numeric_limits<std::int64_t>::min());
    EXPECT_EQ(doc.toFloat(items[3]), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(doc.text(items[4]), "aA\n'A\\q"); // GET 1: the same decoded text
    EXPECT_EQ(doc.text(items[5]), "plain");
    EXPECT_EQ(doc.toInt(items[6]), 7); // appended to the list's DUP (the same list), which POP dropped
    EXPECT_EQ(doc.text(items[7]), "\xc3\xa9");
}

TEST(PickleReader, RefusesBadTextOperandsAndGlobalsOfProtocol0)
{
    EXPECT_EQ(errorOf("(lI1x\na."), "t.pickle: at byte offset 2: pickle opcode INT has the operand \"1x\", not a decimal "
                                   "integer (corrupt pickle)");
    EXPECT_EQ(errorOf("I12"), "t.pickle: at byte offset 0: the pickle is cut off inside opcode INT (its operand has "
                              "no ending newline)");
    EXPECT_EQ(errorOf("S'abc\n."), "t.pickle: at byte offset 0: pickle opcode STRING has the operand \"'abc\", not a "
                                   "quoted string (corrupt pickle)");
    EXPECT_EQ(errorOf("V\\u12\n."), "t.pickle: at byte offset 0: pickle opcode UNICODE has the operand \"\\u12\", not "
                                   "text with complete \\u escapes (corrupt pickle)");
    EXPECT_EQ(errorOf("Fone\n."), "t.pickle: at byte offset 0: pickle opcode FLOAT has the operand \"one\", not a float "
                                  "(corrupt pickle)");
    EXPECT_EQ(errorOf("g3\n."), "t.pickle: at byte offset 0: memo index 3 was never stored (corrupt pickle)");
    // pickle.dumps(os.system, protocol=0) and a dict that reaches a GLOBAL after its first key.
    EXPECT_EQ(errorOf("cposix\nsystem\np0\n."), "t.pickle: pickle opcode GLOBAL (0x63) at byte offset 0 is not "
                                               "allowed: gpumem reads only plain-data pickles and never runs code "
                                               "from them");
    EXPECT_NE(errorOf("(dp0\nVsegments\np1\n(S'ls'\nios\nsystem\n.")
                  .find("pickle opcode INST (0x69) at byte offset 25 is not allowed"),
        std::string::npos);
}

TEST(PickleReader, RefusesUnknownOpcodes)
{
    EXPECT_NE(errorOf(std::string("\x80\x02\xff", 3)).find("at byte offset 2: byte 0xff is not a pickle opcode"),
        std::string::npos);
    EXPECT_NE(errorOf(std::string("\x80\x06\x4e\x2e", 4)).find("pickle protocol 6 is newer than 5"), std::string::npos);
}

TEST(PickleReader, RefusesTruncatedAndCorruptPickles)
{
    EXPECT_NE(errorOf(kProtocol2.substr(0, 100)).find("t.pickle: at byte offset"), std::string::npos);
    EXPECT_NE(errorOf(kProtocol2.substr(0, kProtocol2.size() - 1)).find("without a STOP opcode"), std::string::npos);
    // BINUNICODE claiming 4 GiB of text.
    EXPECT_NE(errorOf(std::string("\x80\x02\x58\xff\xff\xff\xff", 7)).find("cut off inside opcode BINUNICODE"),
        std::string::npos);
    EXPECT_NE(errorOf(std::string("\x80\x02\x2e", 3)).find("on an empty stack"), std::string::npos);
    EXPECT_NE(errorOf(std::string("\x80\x02\x68\x05\x2e", 5)).find("memo index 5 was never stored"), std::string::npos);
    // LONG_BINPUT with an index far beyond the file: refused rather than allocating 4 G entries.
    EXPECT_NE(errorOf(std::string("\x80\x02\x4e\x72\xff\xff\xff\xff\x2e", 9))
                  .find("memo index 4294967295 is larger than the pickle"),
        std::string::npos);
    EXPECT_NE(
        errorOf(std::string("\x80\x02\x4b\x01\x4b\x02\x73\x2e", 8)).find("finds too few values"), std::string::npos);
    EXPECT_NE(errorOf(std::string("\x80\x02\x5d\x4b\x01\x4b\x02\x73\x2e", 9))
                  .find("SETITEM applies to a dict but finds a list"),
        std::string::npos);
    EXPECT_NE(errorOf(std::string("\x80\x02\x5d\x65\x2e", 5)).find("APPENDS without a MARK"), std::string::npos);
}

TEST(PickleReader, RefusesToConvertACycleToJson)
{
    // l = []; l.append(l); pickle.dumps(l, protocol=4)
    const std::string cycle("\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x68\x00\x61\x2e", 17);
    PickleDocument doc = PickleDocument::parse(cycle, "cycle.pickle");
    ASSERT_EQ(doc.items(doc.root()).size(), 1u);
    EXPECT_EQ(doc.items(doc.root())[0].bits, doc.root().bits);
    EXPECT_THROW(doc.toJson(doc.root()), FormatError);
}

TEST(PickleReader, BuildsTheSameTreeFromJson)
{
    auto j = nlohmann::json::parse(R"({"k": [1, -2, 2.5, "s", null, false, {"n": 18446744073709551615}]})");
    PickleDocument doc = PickleDocument::fromJson(j, "x.json");
    auto items = doc.items(*doc.find(doc.root(), "k"));
    ASSERT_EQ(items.size(), 7u);
    EXPECT_EQ(doc.toInt(items[1]), -2);
    EXPECT_EQ(doc.text(items[3]), "s");
    EXPECT_EQ(doc.find(items[6], "n")->kind, PickleKind::BigInt);
    EXPECT_EQ(doc.toJson(items[5]), false);
}

TEST(PickleReader, RendersInvalidUtf8AndNonStringKeysAsValidJson)
{
    // Found by fuzz_snapshot_pickle: a str with bytes that are not UTF-8 made nlohmann::json::dump throw.
    PickleDocument bad = PickleDocument::parse(std::string("\x80\x04\x8c\x03\x61\xff\x91\x2e", 8), "bad.pickle");
    nlohmann::json j = bad.toJson(bad.root());
    EXPECT_EQ(j.get<std::string>(), "a\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_NO_THROW((void)j.dump());
    // {1: 2, None: 3}
    PickleDocument keys
        = PickleDocument::parse(std::string("\x80\x04\x7d\x4b\x01\x4b\x02\x73\x4e\x4b\x03\x73\x2e", 13), "keys.pickle");
    EXPECT_EQ(keys.toJson(keys.root()), nlohmann::json::parse(R"({"1": 2, "<None>": 3})"));
    EXPECT_TRUE(isValidUtf8("h\xC3\xA9llo"));
    EXPECT_FALSE(isValidUtf8("\xED\xA0\x80")); // a surrogate, as Python's surrogatepass writes
    EXPECT_FALSE(isValidUtf8("\xC0\xAF")); // overlong
    EXPECT_EQ(sanitizeUtf8("x\xED\xA0\x80y"), "x\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDy");
}

TEST(PickleReader, RepeatedListsOfMemoReferencesShareItemsOnlyWhileTheMemoIsUnchanged)
{
    // Written by hand (pickle.loads gives the same JSON): memo 1 = 'x', memo 2 = 7; then
    // A = [x, 7, x] (MARK, GETs, APPENDS), B = the same bytes again, C = [7, x], G = C's bytes again,
    // A grown by one more x, E = A's first bytes again, BINPUT 2 overwrites memo 2 with 9, and
    // D = A's first bytes again, which now mean [x, 9, x].
    const std::string bytes("\x80\x04\x5d\x94\x28\x8c\x01\x78\x94\x4b\x07\x94\x5d\x94\x28\x68\x01\x68\x02\x68\x01\x65"
                            "\x5d\x94\x28\x68\x01\x68\x02\x68\x01\x65\x5d\x94\x28\x68\x02\x68\x01\x65\x5d\x94\x28\x68"
                            "\x02\x68\x01\x65\x68\x03\x28\x68\x01\x65\x5d\x94\x28\x68\x01\x68\x02\x68\x01\x65\x4b\x09"
                            "\x71\x02\x5d\x94\x28\x68\x01\x68\x02\x68\x01\x65\x65\x2e",
        80);
    PickleDocument doc = PickleDocument::parse(bytes, "memo_lists.pickle");
    EXPECT_EQ(doc.toJson(doc.root()),
        nlohmann::json::parse(
            R"(["x", 7, ["x", 7, "x", "x"], ["x", 7, "x"], [7, "x"], [7, "x"], ["x", 7, "x", "x"], ["x", 7, "x"], 9, ["x", 9, "x"]])"));
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 10u);
    const PickleValue &a = items[2], &b = items[3], &c = items[4], &g = items[5], &e = items[7], &d = items[9];
    EXPECT_EQ(items[6].bits, a.bits); // the grown A is the same list (memo GET)
    // G repeats C: one identity, the same items in place.
    EXPECT_EQ(doc.itemsIdentity(g), doc.itemsIdentity(c));
    EXPECT_EQ(doc.items(g).data(), doc.items(c).data());
    // B and E repeat A's first items, but A grew afterwards: they keep three items, A has four, and
    // none of them claims A's identity.
    EXPECT_EQ(doc.items(b).size(), 3u);
    EXPECT_EQ(doc.items(e).size(), 3u);
    EXPECT_EQ(doc.items(a).size(), 4u);
    EXPECT_NE(doc.itemsIdentity(b), doc.itemsIdentity(a));
    EXPECT_NE(doc.itemsIdentity(e), doc.itemsIdentity(a));
    // D has A's first bytes, but memo 2 was overwritten in between: its own items, with the new value.
    EXPECT_EQ(doc.toInt(doc.items(d)[1]), 9);
    EXPECT_NE(doc.itemsIdentity(d), doc.itemsIdentity(b));
    EXPECT_NE(doc.items(d).data(), doc.items(b).data());
    // A scalar is its own identity.
    EXPECT_EQ(doc.itemsIdentity(items[1]), items[1].bits);
}

TEST(PickleReader, RefusesAnUnsetMemoIndexInAListOfMemoReferences)
{
    // [memo 0 (the list itself), memo 5 (never stored)]: the second GET, at byte 7, is refused.
    EXPECT_EQ(errorOf(std::string("\x80\x04\x5d\x94\x28\x68\x00\x68\x05\x65\x2e", 11)),
        "t.pickle: at byte offset 7: memo index 5 was never stored (corrupt pickle)");
    // The same GETs cut off before APPENDS: the usual path reports the missing STOP.
    EXPECT_NE(errorOf(std::string("\x80\x04\x5d\x94\x28\x68\x00\x68\x00", 9)).find("without a STOP"),
        std::string::npos);
}

TEST(PickleReader, RepeatedLongListsOfMemoReferencesMatchOnlyTheSameList)
{
    // Lists of 40 memo GETs (80 bytes: longer than the first bytes a repeat is found by), built by
    // hand: memo 1..60 = "s1".."s60"; L1 = s1..s40, L2 = L1 again, L3 = s1..s39 + s51 (same first
    // bytes, another end), L4 = L1's items + s42 (L1 is its prefix), L5 = L3 again, then memo 5 is
    // overwritten with 7 and L6 = L1's bytes again.
    std::string p("\x80\x04\x5d\x94\x28", 5); // PROTO 4, the outer list (memo 0), MARK
    nlohmann::json expected = nlohmann::json::array();
    std::vector<nlohmann::json> memo(61);
    for (int i = 1; i <= 60; ++i) {
        const std::string s = "s" + std::to_string(i);
        p += '\x8c';
        p += static_cast<char>(s.size());
        p += s + '\x94'; // SHORT_BINUNICODE, MEMOIZE
        memo[static_cast<std::size_t>(i)] = s;
        expected.push_back(s);
    }
    auto list = [&](std::vector<int> refs) {
        p += "\x5d\x94\x28"; // EMPTY_LIST, MEMOIZE, MARK
        nlohmann::json items = nlohmann::json::array();
        for (int r : refs) {
            p += '\x68'; // BINGET
            p += static_cast<char>(r);
            items.push_back(memo[static_cast<std::size_t>(r)]);
        }
        p += '\x65'; // APPENDS
        expected.push_back(items);
    };
    std::vector<int> l1, l3;
    for (int i = 1; i <= 40; ++i)
        l1.push_back(i);
    l3 = std::vector<int>(l1.begin(), l1.end() - 1);
    l3.push_back(51);
    std::vector<int> l4 = l1;
    l4.push_back(42);
    list(l1);
    list(l1);
    list(l3);
    list(l4);
    list(l3);
    p += "\x4b\x07\x71\x05"; // 7, BINPUT 5
    expected.push_back(7);
    memo[5] = 7;
    list(l1);
    p += "\x65\x2e"; // APPENDS, STOP

    PickleDocument doc = PickleDocument::parse(p, "long_lists.pickle");
    EXPECT_EQ(doc.toJson(doc.root()), expected);
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 67u);
    const PickleValue &L1 = items[60], &L2 = items[61], &L3 = items[62], &L4 = items[63], &L5 = items[64],
                      &L6 = items[66];
    EXPECT_EQ(doc.itemsIdentity(L2), doc.itemsIdentity(L1));
    EXPECT_EQ(doc.itemsIdentity(L5), doc.itemsIdentity(L3));
    EXPECT_NE(doc.itemsIdentity(L3), doc.itemsIdentity(L1));
    EXPECT_NE(doc.itemsIdentity(L4), doc.itemsIdentity(L1));
    EXPECT_EQ(doc.items(L4).size(), 41u);
    EXPECT_EQ(doc.text(doc.items(L3).back()), "s51");
    EXPECT_NE(doc.itemsIdentity(L6), doc.itemsIdentity(L1));
    EXPECT_EQ(doc.toInt(doc.items(L6)[4]), 7);
}

TEST(PickleReader, DupBeyondTheInitialStackCapacityCopiesTheTopBeforeGrowing)
{
    // Found by fuzz_snapshot_pickle (ASan: heap-use-after-free): DUP pushed a reference to the top,
    // and the stack's growth freed it first. MARK, 1, DUP × 300, LIST, STOP = [1] * 301.
    std::string bytes("\x80\x04\x28\x4b\x01", 5);
    bytes += std::string(300, '\x32');
    bytes += "\x6c\x2e";
    PickleDocument doc = PickleDocument::parse(bytes, "dup.pickle");
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 301u);
    for (const auto& item : items)
        ASSERT_EQ(doc.toInt(item), 1);
}

namespace {
// A protocol-4 pickle of a list, written opcode by opcode, with the JSON that pickle.loads gives.
struct PickleWriter {
    std::string bytes = std::string("\x80\x04\x5d\x94\x28", 5); // PROTO 4, EMPTY_LIST, MEMOIZE (0), MARK
    nlohmann::json expected = nlohmann::json::array();
    int memo = 1;
    int str(const std::string& s) // SHORT_BINUNICODE, MEMOIZE; returns its memo index
    {
        bytes += '\x8c';
        bytes += static_cast<char>(s.size());
        bytes += s + '\x94';
        expected.push_back(s);
        return memo++;
    }
    // A frame-like dict {name: <memo nameRef>, line: <line>} of memo GETs and BININT1, as PyTorch
    // writes a frame: EMPTY_DICT, MEMOIZE, MARK, BINGET name, BINGET nameRef, BINGET line, BININT1, SETITEMS.
    int dict(int nameKey, int nameRef, int lineKey, int line, const nlohmann::json& json)
    {
        bytes += "\x7d\x94\x28";
        for (int ref : { nameKey, nameRef, lineKey }) {
            bytes += '\x68';
            bytes += static_cast<char>(ref);
        }
        bytes += '\x4b';
        bytes += static_cast<char>(line);
        bytes += '\x75';
        expected.push_back(json);
        return memo++;
    }
    std::string finish()
    {
        str(std::string(20, 'x')); // so that the dicts before are not among the pickle's last bytes
        return bytes + "\x65\x2e"; // APPENDS, STOP
    }
};
} // namespace

TEST(PickleReader, RepeatedPlainDictsShareItemsOnlyWhileTheMemoAndTheFirstDictAreUnchanged)
{
    // pickle.loads gives the same JSON. A = {name: f, line: 7}; B, D = A's bytes again; C = line 8;
    // then A grows (GET A, SETITEM line = 9); E = A's bytes again; BINPUT overwrites memo f with
    // "g"; F = A's bytes again (now name g), G = F's bytes again.
    PickleWriter w;
    const int name = w.str("name"), file = w.str("file"), line = w.str("line"), f = w.str("f"), g = w.str("g");
    (void)file;
    const nlohmann::json f7 = { { "name", "f" }, { "line", 7 } };
    const int a = w.dict(name, f, line, 7, f7);
    w.dict(name, f, line, 7, f7); // B
    w.dict(name, f, line, 8, { { "name", "f" }, { "line", 8 } }); // C
    w.dict(name, f, line, 7, f7); // D
    w.bytes += std::string("\x68") + static_cast<char>(a) + "\x68" + static_cast<char>(line) + "\x4b\x09\x73"; // A[line] = 9
    w.expected[5]["line"] = 9;
    w.expected.push_back(w.expected[5]);
    w.dict(name, f, line, 7, f7); // E
    w.bytes += std::string("\x68") + static_cast<char>(g) + "\x71" + static_cast<char>(f); // GET g, BINPUT over f
    w.expected.push_back("g");
    const nlohmann::json g7 = { { "name", "g" }, { "line", 7 } };
    w.dict(name, f, line, 7, g7); // F
    w.dict(name, f, line, 7, g7); // G
    const std::string bytes = w.finish(); // the document views it
    PickleDocument doc = PickleDocument::parse(bytes, "frames.pickle");
    EXPECT_EQ(doc.toJson(doc.root()), w.expected);

    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 15u);
    const PickleValue &A = items[5], &B = items[6], &C = items[7], &D = items[8], &E = items[10], &F = items[12],
                      &G = items[13];
    for (const PickleValue* v : { &A, &B, &C, &D, &E, &F, &G })
        ASSERT_EQ(v->kind, PickleKind::Dict);
    EXPECT_EQ(items[9].bits, A.bits); // the grown A is the same dict (memo GET)
    // Every dict is its own container (a memo GET of B yields B, not A) ...
    EXPECT_NE(B.bits, A.bits);
    EXPECT_NE(D.bits, B.bits);
    // ... but B and D hold A's items as A was made, in the same place. A grew afterwards, so
    // neither claims A's identity (different identities say nothing; equal ones mean equal items).
    EXPECT_EQ(doc.items(B).data(), doc.items(D).data());
    EXPECT_EQ(doc.items(B).size(), 4u);
    EXPECT_EQ(doc.items(A).size(), 6u);
    EXPECT_EQ(doc.toInt(*doc.find(A, "line")), 9);
    EXPECT_EQ(doc.toInt(*doc.find(B, "line")), 7);
    EXPECT_NE(doc.itemsIdentity(B), doc.itemsIdentity(A));
    EXPECT_NE(doc.itemsIdentity(C), doc.itemsIdentity(B));
    // E repeats A's first bytes after A grew: A's original items, not the grown ones.
    EXPECT_EQ(doc.items(E).data(), doc.items(B).data());
    EXPECT_EQ(doc.toInt(*doc.find(E, "line")), 7);
    // F has the same bytes, but the memo slot of "f" was overwritten in between: its own items.
    EXPECT_EQ(doc.text(*doc.find(F, "name")), "g");
    EXPECT_NE(doc.itemsIdentity(F), doc.itemsIdentity(B));
    EXPECT_NE(doc.items(F).data(), doc.items(B).data());
    // G repeats F with the memo unchanged since: F's items and identity.
    EXPECT_EQ(doc.itemsIdentity(G), doc.itemsIdentity(F));
    EXPECT_EQ(doc.items(G).data(), doc.items(F).data());
}

TEST(PickleReader, FirstOccurrenceOfAPlainDictIsIdentifiedAsItself)
{
    // Without growth in between, the first dict of a kind keeps its own identity and its repeats
    // take it: what the importer uses to resolve each distinct frame once.
    PickleWriter w;
    const int name = w.str("name"), line = w.str("line"), f = w.str("f");
    const nlohmann::json f3 = { { "name", "f" }, { "line", 3 } };
    w.dict(name, f, line, 3, f3);
    w.dict(name, f, line, 3, f3);
    w.dict(name, f, line, 3, f3);
    const std::string bytes = w.finish(); // the document views it
    PickleDocument doc = PickleDocument::parse(bytes, "frames.pickle");
    EXPECT_EQ(doc.toJson(doc.root()), w.expected);
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 7u);
    EXPECT_EQ(doc.itemsIdentity(items[3]), items[3].bits);
    EXPECT_EQ(doc.itemsIdentity(items[4]), items[3].bits);
    EXPECT_EQ(doc.itemsIdentity(items[5]), items[3].bits);
}

TEST(PickleReader, RefusesAnUnsetMemoIndexInAPlainDict)
{
    // [name, {name: memo 9}, 'x' * 20]: memo 9 was never stored; the GET at byte 17 is refused.
    std::string bytes("\x80\x04\x5d\x94\x28\x8c\x04name\x94\x7d\x94\x28\x68\x01\x68\x09\x75\x8c\x14", 22);
    bytes += std::string(20, 'x') + "\x94\x65\x2e";
    EXPECT_EQ(errorOf(bytes), "t.pickle: at byte offset 17: memo index 9 was never stored (corrupt pickle)");
}

// Brief tx item 2: messages said "is a None" and "is a int".
TEST(PickleReader, NamesEachKindWithItsArticle)
{
    using gpumem::PickleKind;
    using gpumem::withArticle;
    EXPECT_EQ(withArticle(PickleKind::None), "None");
    EXPECT_EQ(withArticle(PickleKind::Bool), "a bool");
    EXPECT_EQ(withArticle(PickleKind::Int), "an int");
    EXPECT_EQ(withArticle(PickleKind::BigInt), "an int");
    EXPECT_EQ(withArticle(PickleKind::Float), "a float");
    EXPECT_EQ(withArticle(PickleKind::Str), "a str");
    EXPECT_EQ(withArticle(PickleKind::Binary), "a bytes object");
    EXPECT_EQ(withArticle(PickleKind::Dict), "a dict");
}

TEST(PickleInput, ReadsPlainAndGzipPicklesOnceAndKeepsTheirBytesAlive)
{
    // pickle.dumps({'a': [1, 'xy']}, protocol=4)
    const std::string pickle("\x80\x04\x95\x13\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x61\x94\x5d\x94"
                             "\x28\x4b\x01\x8c\x02\x78\x79\x94\x65\x73\x2e",
        30);
    const std::string stem = ::testing::TempDir() + "gpumem_pickle_input_" + std::to_string(::getpid());
    const std::string plain = stem + ".pickle";
    const std::string gz = stem + ".pickle.gz";
    std::ofstream(plain, std::ios::binary) << pickle;
    std::ofstream(gz, std::ios::binary) << gpumem::test::gzipOf(pickle);
    EXPECT_EQ(PickleDocument::readInput(plain).bytes, pickle);
    EXPECT_EQ(PickleDocument::readInput(gz).bytes, pickle);
    PickleDocument a = PickleDocument::readFile(plain);
    PickleDocument b = PickleDocument::parse(PickleDocument::readInput(gz), gz);
    std::filesystem::remove(plain);
    std::filesystem::remove(gz);
    const auto expected = nlohmann::json::parse(R"({"a": [1, "xy"]})");
    EXPECT_EQ(a.toJson(a.root()), expected);
    EXPECT_EQ(b.toJson(b.root()), expected);
    EXPECT_EQ(b.source(), gz);
}

namespace {
// Takes every dict offered, and says where it came from.
class TakeEveryDict final : public PickleDictSink {
public:
    bool take(std::span<const PickleValue> kv, std::uint64_t, std::size_t list, std::string_view) override
    {
        lists.push_back(list);
        keys.push_back(kv.size() / 2);
        return true;
    }
    std::vector<std::size_t> lists, keys;
};
std::string snapshotFile(const char* name) { return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/snapshot/" + name; }
} // namespace

TEST(PickleReader, HandsTheTraceEntryDictsToASinkAndKeepsThemEmpty)
{
    // tests/data/snapshot/entry_shapes.pickle: nine entries in device_traces[0], each a dict filled by
    // one SETITEMS, with 6, 7 or 5 keys (entry_shapes.json shows them).
    const std::string path = snapshotFile("entry_shapes.pickle");
    TakeEveryDict sink;
    PickleDocument doc = PickleDocument::parse(PickleDocument::readInput(path), path, sink);
    EXPECT_EQ(sink.lists, std::vector<std::size_t>(9, 0));
    EXPECT_EQ(sink.keys, (std::vector<std::size_t> { 6, 6, 6, 6, 7, 7, 6, 5, 6 }));
    const PickleValue* traces = doc.find(doc.root(), "device_traces");
    ASSERT_NE(traces, nullptr);
    const auto entries = doc.items(doc.items(*traces)[0]);
    ASSERT_EQ(entries.size(), 9u);
    for (std::size_t i = 0; i < entries.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_TRUE(doc.isTaken(entries[i]));
        EXPECT_TRUE(doc.items(entries[i]).empty());
    }
    // The segments are not trace entries: their dicts keep their items.
    const auto segments = doc.items(*doc.find(doc.root(), "segments"));
    ASSERT_EQ(segments.size(), 1u);
    EXPECT_FALSE(doc.isTaken(segments[0]));
    EXPECT_EQ(doc.toInt(*doc.find(segments[0], "total_size")), 2097152);
}

TEST(PickleReader, AMemoGetOfADictTheSinkTookStopsTheParse)
{
    // tests/data/snapshot/entry_repeated_object.pickle repeats three entry dicts by memo GETs.
    const std::string path = snapshotFile("entry_repeated_object.pickle");
    TakeEveryDict sink;
    EXPECT_THROW(PickleDocument::parse(PickleDocument::readInput(path), path, sink), PickleSinkRefused);
    PickleDocument whole = PickleDocument::parse(PickleDocument::readInput(path), path);
    EXPECT_EQ(whole.items(whole.items(*whole.find(whole.root(), "device_traces"))[0]).size(), 12u);
}
