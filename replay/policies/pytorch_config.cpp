#include "replay/policies/pytorch_config.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

namespace gpumem::replay {

namespace {

    bool isPowerOfTwo(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
    unsigned floorLog2(std::uint64_t v) { return 63u - unsigned(std::countl_zero(v)); }

    // roundup_power2_next_division (CUDACachingAllocator.cpp): the next multiple of
    // floor_pow2(size) / divisions, or 2 x floor_pow2 when that step is 0. Powers of two stay.
    Bytes roundupPower2NextDivision(Bytes size, std::uint64_t divisions)
    {
        if (isPowerOfTwo(size))
            return size;
        Bytes floor2 = Bytes(1) << floorLog2(size);
        Bytes step = floor2 >> floorLog2(divisions);
        if (step == 0)
            return floor2 << 1;
        Bytes down = size & ~(step - 1);
        return down == size ? size : down + step;
    }

    std::string joined(const std::vector<std::string>& items)
    {
        std::string out;
        for (const auto& s : items)
            out += (out.empty() ? "" : ", ") + s;
        return out;
    }

    std::uint64_t parseUnsigned(std::string_view key, std::string_view value)
    {
        std::uint64_t v = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec == std::errc::result_out_of_range && end == value.data() + value.size()) // digits only, too many
            throw UsageError("pytorch option " + std::string(key) + ": '" + std::string(value)
                + "' is too large (at most 18446744073709551615)");
        if (ec != std::errc() || end != value.data() + value.size())
            throw UsageError(
                "pytorch option " + std::string(key) + ": '" + std::string(value) + "' is not a non-negative integer");
        return v;
    }

    double parseDouble(std::string_view key, std::string_view value)
    {
        std::string s(value);
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
            throw UsageError("pytorch option " + std::string(key) + ": '" + s + "' is not a number");
        return v;
    }

    bool parseBool(std::string_view key, std::string_view value)
    {
        if (value == "True" || value == "true" || value == "1")
            return true;
        if (value == "False" || value == "false" || value == "0")
            return false;
        throw UsageError("pytorch option " + std::string(key) + ": '" + std::string(value) + "' must be True or False");
    }

    // roundup_power2_divisions (allocators.md §1.3; c10/core/AllocatorConfig.cpp
    // parseRoundUpPower2Divisions; 2.0: `>` fills from the last listed index inclusive, §1.14).
    void parseDivisions(PyTorchConfig& config, std::string_view value)
    {
        auto& table = config.roundupDivisions;
        if (value.empty() || value.front() != '[') {
            std::uint64_t d = parseUnsigned("roundup_power2_divisions", value);
            if (!isPowerOfTwo(d))
                throw UsageError("pytorch option roundup_power2_divisions: " + std::string(value)
                    + " is not a power of two (e.g. 1, 2, 4, 8)");
            table.fill(d);
            return;
        }
        if (value.back() != ']')
            throw UsageError(
                "pytorch option roundup_power2_divisions: list '" + std::string(value) + "' must end with ']'");
        std::string_view body = value.substr(1, value.size() - 2);
        bool first = true;
        std::size_t lastIndex = 0;
        while (!body.empty()) {
            std::size_t comma = body.find(',');
            std::string_view item = body.substr(0, comma);
            body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 1);
            std::size_t colon = item.find(':');
            if (colon == std::string_view::npos)
                throw UsageError("pytorch option roundup_power2_divisions: item '" + std::string(item)
                    + "' must be SIZE_MB:DIVISIONS or >:DIVISIONS");
            std::string_view bound = item.substr(0, colon);
            std::uint64_t d = parseUnsigned("roundup_power2_divisions", item.substr(colon + 1));
            if (d != 0 && !isPowerOfTwo(d))
                throw UsageError("pytorch option roundup_power2_divisions: divisions " + std::to_string(d)
                    + " is not a power of two or 0");
            if (bound == ">") {
                std::size_t from = config.version == PyTorchVersion::V2_0 ? lastIndex : lastIndex + 1;
                for (std::size_t i = from; i < table.size(); ++i)
                    table[i] = d;
                continue;
            }
            std::uint64_t mb = parseUnsigned("roundup_power2_divisions", bound);
            if (!isPowerOfTwo(mb))
                throw UsageError("pytorch option roundup_power2_divisions: interval " + std::string(bound)
                    + " MB is not a power of two");
            std::size_t index = std::min<std::size_t>(floorLog2(mb), table.size() - 1);
            if (first) {
                for (std::size_t i = 0; i < index; ++i)
                    table[i] = d;
                first = false;
            }
            table[index] = d;
            lastIndex = index;
        }
    }

    const std::vector<std::string>& ignoredKeys()
    {
        static const std::vector<std::string> keys = { "release_lock_on_cudamalloc", "release_lock_on_hipmalloc",
            "pinned_use_cuda_host_register", "pinned_use_hip_host_register", "pinned_num_register_threads",
            "pinned_use_background_threads", "pinned_reserve_segment_size_mb", "pinned_max_round_threshold_mb",
            "pinned_max_cached_size_mb", "graph_capture_record_stream_reuse" };
        return keys;
    }

} // namespace

std::uint64_t PyTorchConfig::divisionsFor(Bytes n) const
{
    unsigned log = floorLog2(n);
    std::size_t index = log > 20 ? log - 20 : 0;
    return roundupDivisions[std::min(index, kRoundupIntervals - 1)];
}

Bytes PyTorchConfig::roundSize(Bytes n) const
{
    if (n < kMinBlockSize)
        return kMinBlockSize;
    std::uint64_t d = divisionsFor(n);
    if (version == PyTorchVersion::V2_0) {
        // 2.0: the gate is d > 0 and the helper returns the size unchanged for d <= 1 (§1.14).
        if (d > 0 && n > kMinBlockSize * d)
            return d <= 1 ? n : roundupPower2NextDivision(n, d);
    } else if (d > 1 && n > kMinBlockSize * d) {
        return roundupPower2NextDivision(n, d);
    }
    return detail::roundUpToMultiple(n, kMinBlockSize);
}

Bytes PyTorchConfig::allocationSize(Bytes rounded) const
{
    if (rounded <= kSmallSize)
        return kSmallBuffer;
    if (rounded < kMinLargeAlloc)
        return largeSegmentSize;
    return detail::roundUpToMultiple(rounded, kRoundLarge);
}

std::string PyTorchConfig::toString() const
{
    std::vector<std::string> parts;
    if (expandableSegments)
        parts.push_back("expandable_segments:True");
    if (maxSplitSize != kUnlimited)
        parts.push_back("max_split_size_mb:" + std::to_string(maxSplitSize / kMiB));
    if (largeSegmentSize != 20 * kMiB)
        parts.push_back("large_segment_size_mb:" + std::to_string(largeSegmentSize / kMiB));
    if (maxNonSplitRounding != largeSegmentSize)
        parts.push_back("max_non_split_rounding_mb:" + std::to_string(maxNonSplitRounding / kMiB));
    if (std::any_of(roundupDivisions.begin(), roundupDivisions.end(), [](auto d) { return d != 0; })) {
        if (std::all_of(
                roundupDivisions.begin(), roundupDivisions.end(), [&](auto d) { return d == roundupDivisions[0]; })) {
            parts.push_back("roundup_power2_divisions:" + std::to_string(roundupDivisions[0]));
        } else {
            std::string list = "[";
            for (std::size_t i = 0; i < kRoundupIntervals; ++i) {
                if (i)
                    list += ',';
                list += std::to_string(Bytes(1) << i);
                list += ':';
                list += std::to_string(roundupDivisions[i]);
            }
            parts.push_back("roundup_power2_divisions:" + list + "]");
        }
    }
    if (garbageCollectionThreshold > 0) {
        std::ostringstream s;
        s << "garbage_collection_threshold:" << garbageCollectionThreshold;
        parts.push_back(s.str());
    }
    if (fractionSet) {
        std::ostringstream s;
        s << "per_process_memory_fraction:" << perProcessMemoryFraction;
        parts.push_back(s.str());
    }
    std::string out;
    for (const auto& p : parts)
        out += (out.empty() ? "" : ",") + p;
    return out;
}

std::vector<ConfOption> splitAllocConf(std::string_view text)
{
    std::string compact;
    for (char c : text)
        if (!std::isspace(static_cast<unsigned char>(c)))
            compact += c;
    std::vector<ConfOption> out;
    std::size_t start = 0;
    int depth = 0;
    for (std::size_t i = 0; i <= compact.size(); ++i) {
        char c = i < compact.size() ? compact[i] : ',';
        if (c == '[')
            ++depth;
        else if (c == ']' && --depth < 0)
            throw UsageError("allocator settings '" + std::string(text) + "': unbalanced ']'");
        if (c != ',' || depth > 0)
            continue;
        std::string item = compact.substr(start, i - start);
        start = i + 1;
        if (item.empty())
            continue;
        std::size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0)
            throw UsageError("allocator settings: '" + item + "' is not key:value");
        out.emplace_back(item.substr(0, colon), item.substr(colon + 1));
    }
    if (depth != 0)
        throw UsageError("allocator settings '" + std::string(text) + "': unbalanced '['");
    return out;
}

bool applyRelease(PyTorchConfig& config, std::string_view release)
{
    unsigned major = 0, minor = 0;
    const char* end = release.data() + release.size();
    auto [p1, e1] = std::from_chars(release.data(), end, major);
    if (e1 != std::errc() || p1 == end || *p1 != '.')
        return false;
    auto [p2, e2] = std::from_chars(p1 + 1, end, minor);
    if (e2 != std::errc())
        return false;
    config.release = std::to_string(major) + "." + std::to_string(minor);
    const auto key = std::pair(major, minor);
    config.version = key < std::pair(2u, 1u) ? PyTorchVersion::V2_0 : PyTorchVersion::Main;
    config.globalEventQueue = key < std::pair(1u, 12u);
    return true;
}

std::vector<std::string> allocConfKeys(PyTorchVersion version)
{
    std::vector<std::string> keys = { "backend", "max_split_size_mb", "roundup_power2_divisions",
        "garbage_collection_threshold", "per_process_memory_fraction", "async_oom_retry" };
    if (version == PyTorchVersion::Main) {
        for (const char* k :
            { "max_non_split_rounding_mb", "large_segment_size_mb", "expandable_segments", "throw_on_cudamalloc_oom" })
            keys.emplace_back(k);
        keys.insert(keys.end(), ignoredKeys().begin(), ignoredKeys().end());
    }
    return keys;
}

void applyAllocConf(PyTorchConfig& config, const std::vector<ConfOption>& options)
{
    const bool v20 = config.version == PyTorchVersion::V2_0;
    bool nonSplitGiven = false;
    std::uint64_t maxSplitMb = 0;
    bool maxSplitGiven = false;
    for (const auto& [key, value] : options) {
        auto keys = allocConfKeys(config.version);
        if (std::find(keys.begin(), keys.end(), key) == keys.end())
            throw UsageError("unknown pytorch" + (config.release.empty() ? std::string() : "@" + config.release) + " option '" + key
                + "'; valid options: " + joined(keys));
        if (key == "backend") {
            if (value != "native" && value != "cudaMallocAsync")
                throw UsageError("pytorch option backend: '" + value + "'; valid values: native, cudaMallocAsync");
            config.asyncBackend = value == "cudaMallocAsync";
        } else if (key == "async_oom_retry") {
            config.asyncOomRetry = parseBool(key, value);
            config.asyncOomRetryGiven = true;
        } else if (key == "max_split_size_mb") {
            maxSplitMb = parseUnsigned(key, value);
            maxSplitGiven = true;
        } else if (key == "max_non_split_rounding_mb") {
            config.maxNonSplitRounding = std::min<std::uint64_t>(parseUnsigned(key, value), kUnlimited / kMiB) * kMiB;
            nonSplitGiven = true;
        } else if (key == "large_segment_size_mb") {
            std::uint64_t mb = parseUnsigned(key, value);
            if (mb <= 10 || mb > (kUnlimited / kMiB))
                throw UsageError("pytorch option large_segment_size_mb: " + value + " must be greater than 10");
            config.largeSegmentSize = mb * kMiB;
        } else if (key == "roundup_power2_divisions") {
            parseDivisions(config, value);
        } else if (key == "garbage_collection_threshold") {
            double t = parseDouble(key, value);
            if (!(t > 0.0 && t < 1.0))
                throw UsageError(
                    "pytorch option garbage_collection_threshold: " + value + " must be between 0 and 1 (exclusive)");
            config.garbageCollectionThreshold = t;
        } else if (key == "expandable_segments") {
            config.expandableSegments = parseBool(key, value);
        } else if (key == "per_process_memory_fraction") {
            double f = parseDouble(key, value);
            if (!(f >= 0.0 && f <= 1.0))
                throw UsageError("pytorch option per_process_memory_fraction: " + value + " must be within [0, 1]");
            config.perProcessMemoryFraction = f;
            // newest: only a fraction below 1 limits (setMemoryFraction); 2.0: any call sets it (§1.9).
            config.fractionSet = v20 || f < 1.0;
        } else if (key == "throw_on_cudamalloc_oom") {
            config.throwOnCudaMallocOom = parseBool(key, value);
        }
        // ignoredKeys(): host-pinned and locking options do not change device placement.
    }
    if (!nonSplitGiven)
        config.maxNonSplitRounding = config.largeSegmentSize;
    else if (config.maxNonSplitRounding < config.largeSegmentSize)
        throw UsageError("pytorch option max_non_split_rounding_mb must be at least large_segment_size_mb ("
            + std::to_string(config.largeSegmentSize / kMiB) + ")");
    if (maxSplitGiven) {
        // newest: >= large_segment_size_mb; 2.0 (and the 2024 CUDAAllocatorConfig): > 20 (§1.13).
        bool ok = v20 ? maxSplitMb > 20 : maxSplitMb >= config.largeSegmentSize / kMiB;
        if (!ok)
            throw UsageError("pytorch option max_split_size_mb: " + std::to_string(maxSplitMb) + " must be "
                + (v20 ? std::string("greater than 20")
                       : ">= large_segment_size_mb (" + std::to_string(config.largeSegmentSize / kMiB) + ")"));
        config.maxSplitSize = std::min<std::uint64_t>(maxSplitMb, kUnlimited / kMiB) * kMiB;
    }
}

void applyRecordedSettings(PyTorchConfig& config, const nlohmann::json& settings)
{
    if (!settings.is_object())
        return;
    if (auto it = settings.find("PYTORCH_CUDA_ALLOC_CONF"); it != settings.end() && it->is_string()) {
        try {
            applyAllocConf(config, splitAllocConf(it->get<std::string>()));
        } catch (const UsageError&) {
            // The structured keys below are authoritative; a string this build cannot parse is skipped.
        }
    }
    if (auto it = settings.find("max_split_size"); it != settings.end() && it->is_number_integer()) {
        std::int64_t v = it->get<std::int64_t>();
        config.maxSplitSize = v < 0 ? kUnlimited : Bytes(v);
    }
    if (auto it = settings.find("garbage_collection_threshold"); it != settings.end() && it->is_number())
        config.garbageCollectionThreshold = it->get<double>();
    if (auto it = settings.find("expandable_segments"); it != settings.end() && it->is_boolean())
        config.expandableSegments = it->get<bool>();
    if (auto it = settings.find("roundup_power2_divisions"); it != settings.end() && it->is_object()) {
        for (const auto& [k, v] : it->items()) {
            std::uint64_t mb = 0;
            auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), mb);
            if (ec != std::errc() || !isPowerOfTwo(mb) || !v.is_number_integer())
                continue;
            std::size_t index = std::min<std::size_t>(floorLog2(mb), kRoundupIntervals - 1);
            config.roundupDivisions[index] = std::uint64_t(std::max<std::int64_t>(0, v.get<std::int64_t>()));
        }
    }
}

} // namespace gpumem::replay
