#include "core/importers/memory_timeline_importer.h"

#include "core/file_io.h"
#include "core/importers/detail/json_number.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <array>
#include <map>
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

    std::int64_t readNumber(od::value v, std::string_view source, std::size_t record, int field)
    {
        static constexpr const char* kFields[] = { "ts", "action", "bytes", "category" };
        std::int64_t out = 0;
        if (v.type() != od::json_type::number || !detail::parseScaledDecimal(v.raw_json_token(), 0, out))
            throw FormatError(std::string(source) + ": record " + std::to_string(record) + ": field " + kFields[field]
                + " is not an integer; a memory-timeline raw export holds [ts_ns, action, bytes, category] lists");
        return out;
    }

    std::vector<Record> parseRecords(std::string& json, std::string_view source)
    {
        if (json.capacity() - json.size() < simdjson::SIMDJSON_PADDING)
            json.reserve(json.size() + simdjson::SIMDJSON_PADDING);
        od::parser parser;
        od::document doc;
        std::vector<Record> records;
        try {
            doc = parser.iterate(simdjson::padded_string_view(json.data(), json.size(), json.capacity()));
            od::array list = doc.get_array();
            for (auto element : list) {
                od::array tuple = element.get_array();
                Record r;
                int field = 0;
                for (auto item : tuple) {
                    if (field >= 4)
                        throw FormatError(std::string(source) + ": record " + std::to_string(records.size())
                            + " has more than 4 fields; a memory-timeline raw export holds [ts_ns, action, bytes, "
                              "category] lists");
                    std::int64_t v = readNumber(item.value(), source, records.size(), field);
                    (field == 0 ? r.ts : field == 1 ? r.action : field == 2 ? r.bytes : r.category) = v;
                    ++field;
                }
                if (field != 4)
                    throw FormatError(std::string(source) + ": record " + std::to_string(records.size()) + " has "
                        + std::to_string(field) + " fields instead of 4 ([ts_ns, action, bytes, category])");
                records.push_back(r);
            }
        } catch (const simdjson::simdjson_error& e) {
            throw FormatError(std::string(source) + ": invalid JSON at record " + std::to_string(records.size()) + " ("
                + e.what() + "); the file is damaged or not a memory-timeline export");
        }
        return records;
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
            std::string json = readFileMaybeGzip(path);
            return importMemoryTimelineJson(json, path, options);
        }
    };
} // namespace

Trace importMemoryTimelineJson(std::string& json, std::string_view source, const LoadOptions& options)
{
    const std::vector<Record> records = parseRecords(json, source);
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
                cursor += (e.size + kAlignment - 1) / kAlignment * kAlignment;
            }
            reopen = 0;
            stack.push_back(e.address);
        } else {
            e.kind = EventKind::Free;
            if (stack.empty()) {
                ++unmatched;
                e.address = cursor; // a fresh address: counted as an unmatched free by pairing too
                cursor += (e.size + kAlignment - 1) / kAlignment * kAlignment;
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
            std::to_string(badAction)
                + " records have an action outside 1–4 (PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY); skipped");
    if (badCategory)
        b.stats().add("unknown_category", Severity::Warning,
            std::to_string(badCategory) + " records have a category index outside 0–7; imported as unknown");
    if (badSign)
        b.stats().add("bad_size_sign", Severity::Warning,
            std::to_string(badSign) + " records have a zero size or a sign that contradicts their action; skipped");
    if (unmatched)
        b.stats().add("unmatched_destroy", Severity::Warning,
            std::to_string(unmatched)
                + " DESTROY/INCREMENT_VERSION records have no live tensor of the same size and category");
    b.stats().add("synthetic_addresses", Severity::Info,
        "the memory-timeline export has no tensor ids or addresses: addresses are synthetic, and each release closes "
        "the "
        "latest live tensor of the same size and category (LIFO), so lifetimes are plausible but not recorded",
        records.size());
    auto& meta = b.metadata();
    meta["source_format"] = "pytorch-memory-timeline";
    meta["tool"] = "pytorch-profiler";
    meta["memory_timeline"]
        = { { "records", records.size() }, { "preexisting", byAction[kPreexisting] }, { "create", byAction[kCreate] },
              { "increment_version", byAction[kIncrementVersion] }, { "destroy", byAction[kDestroy] },
              { "device_assumed", "cuda:0 (the exporter's default; the file does not say)" } };
    return b.build();
}

std::unique_ptr<Importer> makeMemoryTimelineImporter() { return std::make_unique<MemoryTimelineImporter>(); }

} // namespace gpumem
