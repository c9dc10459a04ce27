#include "importers/memory_timeline_importer.h"

#include "core/detail/round_to_multiple.h"
#include "core/file_io.h"
#include "importers/detail/json_cut.h"
#include "importers/detail/json_number.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"
#include "core/units.h"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <array>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <unordered_map>

namespace gpumem {

namespace {
    namespace od = simdjson::ondemand;

    // torch.profiler._memory_profiler: Action enum and the category order of _CATEGORY_TO_COLORS
    // (index 7 is None, "unknown").
    enum Action : std::int64_t { kPreexisting = 1, kCreate = 2, kIncrementVersion = 3, kDestroy = 4 };
    constexpr std::array<Category, 8> kCategoryByIndex
        = { Category::Parameter, Category::OptimizerState, Category::Input, Category::Temporary, Category::Activation,
              Category::Gradient, Category::AutogradDetail, Category::Unknown };
    constexpr Address kAlignment = 512; // synthetic addresses step by sizes rounded to PyTorch's block size

    struct Record {
        std::int64_t ts = 0, action = 0, bytes = 0, category = 0;
    };

    // A record that is valid JSON but not [ts_ns, action, bytes, category]: the message (the source
    // and the record index lead it) and the record.
    struct BadRecord {
        std::string what;
        std::size_t record = 0;
    };

    std::int64_t readNumber(od::value v, std::size_t record, int field)
    {
        static constexpr const char* kFields[] = { "ts", "action", "bytes", "category" };
        std::int64_t out = 0;
        if (v.type() != od::json_type::number)
            throw BadRecord { "record " + std::to_string(record) + ": field " + kFields[field]
                    + " is not an integer; a memory-timeline raw export holds [ts_ns, action, bytes, category] lists",
                record };
        // A number token that does not parse is too large in magnitude. −2^63 is refused too: its
        // magnitude, a DESTROY's size, does not fit in int64.
        const std::string_view token = detail::withoutTrailingBlanks(v.raw_json_token());
        // simdjson types a value by its first byte: "1024abc", "0x7f", "00012" and "2p48" arrive as numbers.
        if (!detail::isJsonNumber(token))
            throw BadRecord { "record " + std::to_string(record) + ": field " + kFields[field] + " is not a JSON number ("
                    + quoteForMessage(token, 40) + "); a memory-timeline raw export holds [ts_ns, action, bytes, category] "
                      "lists of integers",
                record };
        if (!detail::parseScaledDecimal(token, 0, out))
            throw BadRecord { "record " + std::to_string(record) + ": field " + kFields[field] + " is out of range ("
                    + quoteForMessage(token, 40) + "); a memory-timeline raw export's values lie within ±"
                    + std::to_string(std::numeric_limits<std::int64_t>::max()),
                record };
        return out;
    }

    // A simdjson failure inside parseList: the message, the record it fell in and, when the parser
    // still knew it, the byte offset (npos otherwise).
    struct BadJson {
        std::string what;
        std::size_t record = 0;
        std::size_t byte = std::string::npos;
    };

    std::vector<Record> parseList(std::string& json)
    {
        if (json.capacity() - json.size() < simdjson::SIMDJSON_PADDING)
            json.reserve(json.size() + simdjson::SIMDJSON_PADDING);
        od::parser parser;
        od::document doc;
        bool iterating = false; // a document that failed iterate() must not be asked where it stands
        std::vector<Record> records;
        try {
            doc = parser.iterate(simdjson::padded_string_view(json.data(), json.size(), json.capacity()));
            iterating = true;
            od::array list = doc.get_array();
            for (auto element : list) {
                od::array tuple = element.get_array();
                Record r;
                int field = 0;
                for (auto item : tuple) {
                    if (field >= 4)
                        throw BadRecord { "record " + std::to_string(records.size())
                                + " has more than 4 fields; a memory-timeline raw export holds [ts_ns, action, bytes, "
                                  "category] lists",
                            records.size() };
                    std::int64_t v = readNumber(item.value(), records.size(), field);
                    (field == 0 ? r.ts : field == 1 ? r.action : field == 2 ? r.bytes : r.category) = v;
                    ++field;
                }
                if (field != 4)
                    throw BadRecord { "record " + std::to_string(records.size()) + " has " + std::to_string(field)
                            + " fields instead of 4 ([ts_ns, action, bytes, category])",
                        records.size() };
                records.push_back(r);
            }
            // The on-demand parser stops at the list's ']': bytes after it are damage, not ignored.
            if (auto rest = doc.current_location(); !rest.error())
                throw BadJson { "bytes follow the list's closing ']'", records.size(),
                    static_cast<std::size_t>(rest.value_unsafe() - json.data()) };
        } catch (const simdjson::simdjson_error& e) {
            if (e.error() == simdjson::MEMALLOC) // memory, not the file (loadTrace says so)
                throw std::bad_alloc();
            std::string what = e.what();
            if (!what.empty() && what.back() == '.')
                what.pop_back();
            BadJson bad { what, records.size() };
            if (iterating) {
                auto at = doc.current_location();
                if (!at.error() && at.value_unsafe() > json.data() && at.value_unsafe() < json.data() + json.size())
                    bad.byte = static_cast<std::size_t>(at.value_unsafe() - json.data());
            }
            throw bad;
        }
        return records;
    }

    struct Parsed {
        std::vector<Record> records;
        std::string truncated; // the "truncated" anomaly's detail; empty for a whole file
    };

    // The records of the export. `gzipCut` ("" for a plain or whole gzip file) leads the messages when the
    // JSON was inflated from a gzip stream that ends early. A file cut short follows the Kineto importer's
    // rule (docs/kineto-import.md, "Damaged files"; importers/detail/json_cut.h): the complete
    // records before the cut are kept with a "truncated" anomaly, and a cut before the first complete
    // record is a FormatError; both name the byte where the JSON ends. Other damage: a FormatError naming
    // the byte offset and the record.
    Parsed parseRecords(std::string& json, std::string_view source, const std::string& gzipCut)
    {
        const std::string inflated = gzipCut.empty() ? std::string() : gzipCut + "; inflated, ";
        const std::string lead = std::string(source) + ": " + inflated;
        auto damaged = [&](const std::string& what, std::size_t byte, std::uint64_t record) {
            if (byte == std::string::npos) { // the parser failed before it started (invalid UTF-8)
                byte = firstInvalidUtf8(json);
                if (byte < json.size())
                    record = detail::locateJsonArrayCut(std::string_view(json).substr(0, byte)).completeElements;
            }
            return FormatError(lead + "invalid JSON"
                + (byte < json.size() ? " at byte " + std::to_string(byte) : std::string()) + " (record "
                + std::to_string(record) + "): " + what + "; the file is damaged or not a memory-timeline export");
        };
        // Damage to the brackets explains a parse failure after it (at `byte`, npos when unknown), or a
        // record that seems to have the wrong shape at or after the element it falls in (the on-demand
        // parser reads "[1, 2}" as a list).
        auto structure = [&](std::uint64_t record, std::size_t byte) -> std::optional<FormatError> {
            const detail::JsonArrayCut shape = detail::locateJsonArrayCut(json);
            if (shape.damage == std::string_view::npos || shape.completeElements > record || shape.damage > byte)
                return std::nullopt;
            const std::string_view before = std::string_view(json).substr(0, shape.damage);
            const detail::JsonArrayCut prefix = detail::locateJsonArrayCut(before);
            const std::string what = before.find_first_not_of(" \t\r\n") == std::string_view::npos
                ? "the document is not a JSON list (a memory-timeline raw export starts with '[')"
                : !prefix.cut && prefix.damage == std::string_view::npos
                ? "bytes follow the list's closing ']'"
                : std::string("'") + json[shape.damage] + "' closes a container it did not open";
            return damaged(what, shape.damage, shape.completeElements);
        };
        auto badRecord = [&](const BadRecord& bad) {
            if (auto e = structure(bad.record, std::string::npos))
                return *e;
            return FormatError(lead + bad.what);
        };
        try {
            Parsed whole { parseList(json), std::string() };
            if (!gzipCut.empty())
                whole.truncated = gzipCut
                    + "; the JSON inflated from it is whole (the cut fell in the gzip trailer): every record was "
                      "kept, but the stream's CRC-32 could not be checked";
            return whole;
        } catch (const BadRecord& bad) {
            throw badRecord(bad);
        } catch (const BadJson& bad) {
            const detail::JsonArrayCut cut = detail::locateJsonArrayCut(json);
            if (!cut.cut) {
                if (auto e = structure(UINT64_MAX, bad.byte))
                    throw *e;
                throw damaged(bad.what, bad.byte, bad.record);
            }
            const std::string at
                = inflated + "the JSON ends at byte " + std::to_string(cut.size) + ", " + cut.where("record");
            const std::uint64_t kept = cut.completeElements;
            if (kept == 0)
                throw FormatError(std::string(source) + ": " + at
                    + ": the file was cut before its first complete record, so it holds nothing to import; export it "
                      "again");
            json.resize(cut.elementsEnd);
            json += ']';
            Parsed prefix;
            try {
                prefix.records = parseList(json);
            } catch (const BadRecord& again) { // damage before the cut as well
                throw badRecord(again);
            } catch (const BadJson& again) {
                throw damaged(again.what, again.byte, again.record);
            }
            prefix.truncated = at + ": the file was cut; "
                + (kept == 1 ? std::string("the 1 complete record before it (record 0")
                             : "the " + std::to_string(kept) + " complete records before it (records 0.."
                            + std::to_string(kept - 1))
                + ", bytes up to " + std::to_string(cut.elementsEnd) + (kept == 1 ? ") was kept" : ") were kept");
            return prefix;
        }
    }

    class MemoryTimelineImporter final : public Importer {
    public:
        std::string_view name() const override { return "pytorch-memory-timeline"; }
        std::string_view description() const override
        {
            return "PyTorch memory-timeline raw export (.raw.gz): [ts, action, bytes, category] records";
        }
        bool sniff(const SniffInput& input) const override
        {
            // "[[" then an integer, a comma and an action digit 1–4: "[[-1, 1, 4096, 7], …".
            const std::string_view c = input.content;
            std::size_t i = c.find_first_not_of(" \t\r\n");
            auto skip = [&] {
                while (i < c.size() && (c[i] == ' ' || c[i] == '\t' || c[i] == '\r' || c[i] == '\n'))
                    ++i;
            };
            if (i == std::string_view::npos || c[i] != '[')
                return false;
            ++i, skip();
            if (i >= c.size() || c[i] != '[')
                return false;
            ++i, skip();
            if (i < c.size() && c[i] == '-')
                ++i;
            const std::size_t digits = i;
            while (i < c.size() && c[i] >= '0' && c[i] <= '9')
                ++i;
            if (i == digits)
                return false;
            skip();
            if (i >= c.size() || c[i] != ',')
                return false;
            ++i, skip();
            return i + 1 < c.size() && c[i] >= '1' && c[i] <= '4' && (c[i + 1] == ',' || c[i + 1] == ' ');
        }
        Trace load(const std::string& path, const LoadOptions& options) const override
        {
            GzipEnd gzip;
            std::string json = readFileMaybeGzip(path, gzip);
            if (gzip.endsEarly)
                return importMemoryTimelineJsonFromCutGzip(json, path, gzip.compressedBytes, options);
            return importMemoryTimelineJson(json, path, options);
        }
    };
} // namespace

namespace {
    Trace importRecords(
        std::string& json, std::string_view source, const LoadOptions& options, const std::string& gzipCut)
    {
        Parsed parsed = parseRecords(json, source, gzipCut);
        const std::vector<Record>& records = parsed.records;
        if (options.progress && !options.progress(0.5))
            throw Cancelled();
        TraceBuilder b;
        const DeviceId dev = b.device(DeviceType::Cuda, 0);
        const StreamId stream = b.stream(dev, 0);

        TimeNs start = 0;
        bool haveStart = false;
        for (const auto& r : records)
            if (r.ts >= 0 && (!haveStart || r.ts < start))
                start = r.ts, haveStart = true;

        // Live lifetimes by (bytes, category): a stack of synthetic addresses (LIFO matching).
        std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Address>> live;
        Address cursor = kAlignment;
        Address reopen = 0; // the address an INCREMENT_VERSION's −half just closed (its +half reuses it)
        std::uint64_t badAction = 0, badCategory = 0, unmatched = 0, badSign = 0;
        std::array<std::uint64_t, 5> byAction {};
        for (std::size_t i = 0; i < records.size(); ++i) {
            const Record& r = records[i];
            if (r.action < kPreexisting || r.action > kDestroy) {
                ++badAction;
                continue;
            }
            ++byAction[static_cast<std::size_t>(r.action)];
            std::int64_t categoryIndex = r.category;
            if (categoryIndex < 0 || categoryIndex > 7) {
                ++badCategory;
                categoryIndex = 7;
            }
            const bool positive = r.bytes > 0;
            if (r.bytes == 0 || (r.action == kDestroy && positive)
                || ((r.action == kCreate || r.action == kPreexisting) && !positive)) {
                ++badSign;
                continue;
            }
            MemoryEvent e;
            e.time = r.ts < 0 ? start : r.ts;
            e.device = dev;
            e.stream = stream;
            e.size = static_cast<Bytes>(positive ? r.bytes : -r.bytes);
            e.category = kCategoryByIndex[static_cast<std::size_t>(categoryIndex)];
            e.sequence = i;
            auto& stack = live[{ static_cast<std::int64_t>(e.size), categoryIndex }];
            if (positive) {
                e.kind = EventKind::Alloc;
                if (r.action == kIncrementVersion && reopen != 0) {
                    e.address = reopen;
                } else {
                    e.address = cursor;
                    cursor += detail::roundUpToMultiple(e.size, kAlignment);
                }
                reopen = 0;
                stack.push_back(e.address);
            } else {
                e.kind = EventKind::Free;
                if (stack.empty()) {
                    ++unmatched;
                    e.address = cursor; // a fresh address: counted as an unmatched free by pairing too
                    cursor += detail::roundUpToMultiple(e.size, kAlignment);
                    reopen = 0;
                } else {
                    e.address = stack.back();
                    stack.pop_back();
                    reopen = r.action == kIncrementVersion ? e.address : 0;
                }
            }
            b.add(e);
        }
        if (badAction)
            b.stats().add("unknown_action", Severity::Warning,
                counted(badAction, "record has", "records have")
                    + " an action outside 1–4 (PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY); skipped");
        if (badCategory)
            b.stats().add("unknown_category", Severity::Warning,
                counted(badCategory, "record has", "records have") + " a category index outside 0–7; imported as unknown");
        if (badSign)
            b.stats().add("bad_size_sign", Severity::Warning,
                counted(badSign, "record has", "records have") + " a zero size or a sign that contradicts the action; skipped");
        if (unmatched)
            b.stats().add("unmatched_destroy", Severity::Warning,
                counted(unmatched, "DESTROY/INCREMENT_VERSION record has", "DESTROY/INCREMENT_VERSION records have")
                    + " no live tensor of the same size and category");
        b.stats().add("synthetic_addresses", Severity::Info,
            "the memory-timeline export has no tensor ids or addresses: addresses are synthetic, and each release "
            "closes "
            "the "
            "latest live tensor of the same size and category (LIFO), so lifetimes are plausible but not recorded",
            records.size());
        if (!parsed.truncated.empty())
            b.stats().add("truncated", Severity::Error, std::string(source) + ": " + parsed.truncated);
        auto& meta = b.metadata();
        meta["source_format"] = "pytorch-memory-timeline";
        meta["tool"] = "pytorch-profiler";
        meta["memory_timeline"] = { { "records", records.size() }, { "preexisting", byAction[kPreexisting] },
            { "create", byAction[kCreate] }, { "increment_version", byAction[kIncrementVersion] },
            { "destroy", byAction[kDestroy] },
            { "device_assumed", "cuda:0 (the exporter's default; the file does not say)" } };
        return b.build();
    }
} // namespace

Trace importMemoryTimelineJson(std::string& json, std::string_view source, const LoadOptions& options)
{
    return importRecords(json, source, options, std::string());
}

Trace importMemoryTimelineJsonFromCutGzip(
    std::string& json, std::string_view source, std::size_t compressedBytes, const LoadOptions& options)
{
    return importRecords(json, source, options, gzipEndsEarlyAt(compressedBytes));
}

std::unique_ptr<Importer> makeMemoryTimelineImporter() { return std::make_unique<MemoryTimelineImporter>(); }

} // namespace gpumem
