#pragma once
// Where a JSON document whose top level is an object stops, when it stops early: the Kineto importer's
// rule for a trace file cut short (docs/kineto-import.md, "Damaged files"). One pass over the bytes that
// follows strings, escapes and the nesting of objects and arrays without validating anything else
// (the importer re-parses what it keeps with simdjson). Pure functions; thread-safe.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem::detail {

struct JsonCut {
    // True when the document ends before its top-level object closes (and no bracket closed the wrong
    // container before that): the file was cut. False for a whole document or for one damaged elsewhere.
    bool cut = false;
    // Where the list under `listKey` (a top-level member) stands at the end of the bytes.
    enum class Region : std::uint8_t { BeforeList, InList, AfterList } region = Region::BeforeList;
    // What the last byte is inside (the innermost unfinished token or container).
    enum class Token : std::uint8_t { Structure, Key, String, Number, Literal } token = Token::Structure;
    bool insideElement = false; // InList: the end falls inside element `completeElements`
    std::uint64_t completeElements = 0; // whole elements of the list before the end
    std::size_t elementsEnd = 0; // byte just after the last whole element (or after '[' when none)
    std::size_t membersEnd = 0; // byte just after the last whole top-level member value (0: none)
    std::string member; // the top-level key whose value was being read at the end ("" between members)
    std::size_t size = 0; // the byte offset of the end (the document's length)

    // "in a number inside traceEvents[12]", "after traceEvents[11]", "before "traceEvents" began (in the
    // top-level "metadata")", "after traceEvents closed (in the top-level "traceName")".
    std::string where(std::string_view listKey) const;
};

// Scans `json` (a document whose first non-blank byte is '{'). O(bytes).
JsonCut locateJsonCut(std::string_view json, std::string_view listKey);

// The same rule for a document whose top level is itself the list (an array of records, such as the
// PyTorch memory-timeline raw export): where it stops when cut, or the first byte where its
// structure is damaged.
struct JsonArrayCut {
    // True when the document ends before its top-level array closes (and no bracket closed the wrong
    // container before that).
    bool cut = false;
    JsonCut::Token token = JsonCut::Token::Structure; // what the last byte is inside
    bool insideElement = false; // the end falls inside element `completeElements`
    std::uint64_t completeElements = 0; // whole elements before the end (or before `damage`)
    std::size_t elementsEnd = 0; // byte just after the last whole element (or after '[' when none)
    std::size_t size = 0; // the byte offset of the end (the document's length)
    // Not cut: the first byte where the structure is damaged (the first non-blank byte is not '[', a
    // bracket closes the wrong container, or bytes follow the closed array); npos when the brackets,
    // strings and trailing bytes are whole (other damage, such as a missing comma, is not looked for).
    std::size_t damage = std::string_view::npos;

    // "in a number inside record 12", "after record 11", "before record 0" (with `element` = "record").
    std::string where(std::string_view element) const;
};

// Scans `json` (any bytes; a document whose top level is an array is the one that can be cut). O(bytes).
JsonArrayCut locateJsonArrayCut(std::string_view json);

} // namespace gpumem::detail
