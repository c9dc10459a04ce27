// libFuzzer harness for a PyTorch snapshot saved as JSON: PickleDocument::fromJsonText (simdjson
// On-Demand, importers/pickle_json.cpp) against nlohmann::json::parse, which it replaced, on the
// same bytes, then the snapshot importer on the document.
//
// Differential: fromJsonText must accept exactly what nlohmann accepts (except nesting deeper than
// its limit, refused with its own message), build the same tree (objects as nlohmann's std::map sees
// them: the last of repeated keys; numbers by the rule of pickle_reader.h: beyond int64 → clamped),
// and report errors as FormatError naming the byte offset. A mismatch traps; a gpumem::Error from the
// importer is the expected answer to a bad snapshot; anything else escaping, a sanitizer report or a
// hang is a bug.
#include "importers/snapshot_importer.h"

#include "fuzz/fuzz_common.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace {

constexpr int kMaxDepth = 64; // small, so that the depth limit is reached often

// nlohmann's value with numbers as fromJsonText reads them: an unsigned beyond int64 and an integral
// double beyond the int64 range are clamped (BigInt), which toJson renders as int64.
nlohmann::json normalized(const nlohmann::json& j)
{
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
    switch (j.type()) {
    case nlohmann::json::value_t::number_unsigned: {
        const auto u = j.get<std::uint64_t>();
        return u > static_cast<std::uint64_t>(kMax) ? nlohmann::json(kMax)
                                                    : nlohmann::json(static_cast<std::int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: {
        const double f = j.get<double>();
        if (f == std::trunc(f) && (f >= 0x1p63 || f < -0x1p63))
            return f > 0 ? kMax : kMin;
        return j;
    }
    case nlohmann::json::value_t::array: {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& item : j)
            out.push_back(normalized(item));
        return out;
    }
    case nlohmann::json::value_t::object: {
        nlohmann::json out = nlohmann::json::object();
        for (auto it = j.begin(); it != j.end(); ++it)
            out[it.key()] = normalized(it.value());
        return out;
    }
    default:
        return j;
    }
}

int depthOf(const nlohmann::json& j)
{
    int deepest = 0;
    if (j.is_structured())
        for (const auto& item : j)
            deepest = std::max(deepest, 1 + depthOf(item));
    return deepest;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::optional<nlohmann::json> reference;
    try {
        reference = nlohmann::json::parse(bytes);
    } catch (const nlohmann::json::exception&) {
    }
    std::optional<gpumem::PickleDocument> doc;
    try {
        doc = gpumem::PickleDocument::fromJsonText(bytes, "fuzz.json", kMaxDepth);
    } catch (const gpumem::FormatError& e) {
        const std::string_view what = e.what();
        const bool tooDeep = what == "fuzz.json: the JSON nests deeper than 64 levels";
        if (reference && !(tooDeep && depthOf(*reference) > kMaxDepth))
            __builtin_trap(); // refused what nlohmann accepts
        if (!reference && what.rfind("fuzz.json: at byte offset ", 0) != 0)
            __builtin_trap(); // invalid JSON without its byte offset
        return 0;
    }
    if (!reference || depthOf(*reference) > kMaxDepth)
        __builtin_trap(); // accepted what nlohmann refuses, or nesting beyond the limit
    if (doc->toJson(doc->root(), kMaxDepth + 1) != normalized(*reference))
        __builtin_trap(); // a different tree

    try {
        gpumem::Trace trace = gpumem::importPytorchSnapshot(*doc);
        gpumem::fuzz::exercise(trace);
        for (gpumem::DeviceId d = 0; d < trace.devices().size(); ++d)
            (void)gpumem::compareSnapshotState(gpumem::snapshotSegments(*doc), gpumem::replaySnapshotState(trace, d));
    } catch (const gpumem::Error&) {
    }
    return 0;
}
