#include "replay/policy_registry.h"

#include "core/error.h"
#include "core/units.h"
#include "replay/policies/buddy_policy.h"
#include "replay/policies/direct_policy.h"
#include "replay/policies/fit_policy.h"
#include "replay/policies/gmlake_policy.h"
#include "replay/policies/ideal_policy.h"
#include "replay/policies/pytorch_policy.h"
#include "replay/policies/size_class_policy.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <charconv>
#include <cmath>

namespace gpumem::replay {

namespace {

    std::string joined(const std::vector<std::string>& items)
    {
        std::string out;
        for (const auto& s : items)
            out += (out.empty() ? "" : ", ") + s;
        return out;
    }

    std::string policyNames()
    {
        std::vector<std::string> names;
        for (const auto& p : registeredPolicies())
            names.push_back(p.name);
        return joined(names);
    }

    // The `alignment` option of direct and ideal: a positive power of two in bytes.
    Bytes alignmentOption(const PolicySpec& spec, Bytes fallback)
    {
        Bytes alignment = fallback;
        for (const auto& [key, value] : spec.options) {
            if (key != "alignment")
                throw UsageError("unknown " + spec.policy + " option '" + key + "'; valid options: alignment");
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), alignment);
            if (ec != std::errc() || end != value.data() + value.size() || alignment == 0
                || (alignment & (alignment - 1)) != 0)
                throw UsageError(spec.policy + " option alignment: '" + value
                    + "' must be a power of two in bytes (1, 256, 512, …)");
        }
        return alignment;
    }

    void checkNoVersion(const PolicySpec& spec)
    {
        if (!spec.version.empty())
            throw UsageError("policy " + spec.policy + " has no versions; write '" + spec.policy + "' without '@"
                + spec.version + "'");
    }

    PyTorchVersion pytorchVersion(const PolicySpec& spec)
    {
        if (spec.version.empty() || spec.version == "main")
            return PyTorchVersion::Main;
        if (spec.version == "2.0")
            return PyTorchVersion::V2_0;
        throw UsageError("unknown pytorch version '" + spec.version + "'; valid versions: main (default), 2.0");
    }

    // Option values of the classic policies (fit, buddy, size-class, gmlake).
    UsageError badValue(const PolicySpec& spec, const std::string& key, const std::string& value,
        const std::string& expected)
    {
        return UsageError(spec.policy + " option " + key + ": '" + value + "' " + expected);
    }

    Bytes sizeValue(const PolicySpec& spec, const std::string& key, const std::string& value)
    {
        Bytes v = 0;
        try {
            v = parseBytes(value, spec.policy + " option " + key);
        } catch (const UsageError&) {
            throw badValue(spec, key, value, "must be a size in bytes (512, 2MiB, 1GiB)");
        }
        if (v == 0)
            throw badValue(spec, key, value, "must be greater than 0");
        return v;
    }

    Bytes powerOfTwoValue(const PolicySpec& spec, const std::string& key, const std::string& value)
    {
        Bytes v = sizeValue(spec, key, value);
        if (!std::has_single_bit(v))
            throw badValue(spec, key, value, "must be a power of two in bytes (256, 512, 1KiB, 2MiB, …)");
        return v;
    }

    std::uint64_t countValue(const PolicySpec& spec, const std::string& key, const std::string& value)
    {
        std::uint64_t v = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc() || end != value.data() + value.size())
            throw badValue(spec, key, value, "must be a non-negative integer");
        return v;
    }

    bool boolValue(const PolicySpec& spec, const std::string& key, const std::string& value)
    {
        if (value == "true" || value == "True" || value == "1")
            return true;
        if (value == "false" || value == "False" || value == "0")
            return false;
        throw badValue(spec, key, value, "must be true or false");
    }

    [[noreturn]] void unknownOption(const PolicySpec& spec, const std::string& key, const std::vector<std::string>& keys)
    {
        throw UsageError("unknown " + spec.policy + " option '" + key + "'; valid options: " + joined(keys));
    }

    const std::vector<std::string> kFitKeys = { "alignment", "growth_chunk", "growth_chunk_mb", "min_block", "segments" };
    const std::vector<std::string> kBuddyKeys = { "min_order", "min_segment" };
    const std::vector<std::string> kSizeClassKeys = { "max_small", "reserve" };
    const std::vector<std::string> kGmlakeKeys = { "frag_limit", "frag_limit_mb", "reuse_limit" };

    // first-fit, next-fit, best-fit, worst-fit (allocators.md §6 common substrate).
    detail::FreeListConfig fitConfig(const PolicySpec& spec, detail::FitRule rule)
    {
        detail::FreeListConfig config;
        config.rule = rule;
        std::optional<Bytes> minBlock;
        for (const auto& [key, value] : spec.options) {
            if (key == "alignment")
                config.alignment = powerOfTwoValue(spec, key, value);
            else if (key == "growth_chunk")
                config.growthChunk = sizeValue(spec, key, value);
            else if (key == "growth_chunk_mb")
                config.growthChunk = std::max<std::uint64_t>(countValue(spec, key, value), 1) << 20;
            else if (key == "min_block")
                minBlock = sizeValue(spec, key, value);
            else if (key == "segments")
                config.segments = boolValue(spec, key, value);
            else
                unknownOption(spec, key, kFitKeys);
        }
        config.minBlock = minBlock.value_or(config.alignment);
        return config;
    }

    BuddyConfig buddyConfig(const PolicySpec& spec)
    {
        BuddyConfig config;
        for (const auto& [key, value] : spec.options) {
            if (key == "min_order")
                config.minOrder = powerOfTwoValue(spec, key, value);
            else if (key == "min_segment")
                config.minSegment = powerOfTwoValue(spec, key, value);
            else
                unknownOption(spec, key, kBuddyKeys);
        }
        if (config.minOrder < 512 || config.minSegment < config.minOrder)
            throw UsageError("buddy options: min_order must be at least 512 (the device granularity) and min_segment "
                             "at least min_order; got min_order "
                + std::to_string(config.minOrder) + ", min_segment " + std::to_string(config.minSegment));
        return config;
    }

    // reserve:[SIZE:COUNT,…], e.g. [4MiB:16,64MiB:2].
    std::vector<std::pair<Bytes, std::uint32_t>> reserveList(const PolicySpec& spec, const std::string& value)
    {
        const std::string form = "must be a list [SIZE:COUNT,…] such as [4MiB:16,64MiB:2]";
        if (value.size() < 2 || value.front() != '[' || value.back() != ']')
            throw badValue(spec, "reserve", value, form);
        std::vector<std::pair<Bytes, std::uint32_t>> out;
        for (const auto& [size, count] : splitAllocConf(value.substr(1, value.size() - 2))) {
            std::uint64_t n = countValue(spec, "reserve", count);
            if (n == 0 || n > (1u << 20))
                throw badValue(spec, "reserve", count, "(a count) must be between 1 and 1048576");
            out.push_back({ sizeValue(spec, "reserve", size), std::uint32_t(n) });
        }
        if (out.empty())
            throw badValue(spec, "reserve", value, form);
        return out;
    }

    SizeClassConfig sizeClassConfig(const PolicySpec& spec)
    {
        SizeClassConfig config;
        for (const auto& [key, value] : spec.options) {
            if (key == "max_small") {
                config.maxSmall = sizeValue(spec, key, value);
                if (SizeClassPolicy::classSize(config.maxSmall) != config.maxSmall)
                    throw badValue(spec, key, value,
                        "must be a size class (512, 1024, 1536, 2048, then 2^g + j*2^(g-2): 1MiB, 1.25MiB, …); "
                        "the next one is "
                            + std::to_string(SizeClassPolicy::classSize(config.maxSmall)));
            } else if (key == "reserve") {
                config.reserve = reserveList(spec, value);
            } else {
                unknownOption(spec, key, kSizeClassKeys);
            }
        }
        return config;
    }

    // gmlake's own keys; every other key is a pytorch@2.0 option of the allocator underneath.
    GmlakeConfig gmlakeConfig(const PolicySpec& spec)
    {
        GmlakeConfig config;
        std::vector<ConfOption> pytorchOptions;
        for (const auto& [key, value] : spec.options) {
            if (key == "frag_limit") {
                config.fragLimit = sizeValue(spec, key, value);
            } else if (key == "frag_limit_mb") {
                config.fragLimit = countValue(spec, key, value) << 20;
            } else if (key == "reuse_limit") {
                char* end = nullptr;
                config.reuseLimit = std::strtod(value.c_str(), &end);
                if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(config.reuseLimit)
                    || config.reuseLimit < 1.0)
                    throw badValue(spec, key, value, "must be a number >= 1 (default 10)");
            } else {
                pytorchOptions.push_back({ key, value });
            }
        }
        try {
            applyAllocConf(config.pytorch, pytorchOptions);
        } catch (const UsageError& e) {
            throw UsageError(std::string(e.what()) + " (gmlake also takes " + joined(kGmlakeKeys) + ")");
        }
        return config;
    }

    std::vector<std::string> gmlakeKeys()
    {
        std::vector<std::string> keys = kGmlakeKeys;
        auto pytorch = allocConfKeys(PyTorchVersion::V2_0);
        keys.insert(keys.end(), pytorch.begin(), pytorch.end());
        return keys;
    }

    std::optional<detail::FitRule> fitRule(const std::string& name)
    {
        for (auto rule : { detail::FitRule::First, detail::FitRule::Next, detail::FitRule::Best, detail::FitRule::Worst })
            if (name == detail::toString(rule))
                return rule;
        return std::nullopt;
    }

} // namespace

const std::vector<PolicyInfo>& registeredPolicies()
{
    static const std::vector<PolicyInfo> infos = {
        { "pytorch", "PyTorch CUDACachingAllocator (native backend); options in PYTORCH_CUDA_ALLOC_CONF syntax",
            { "2.0" }, allocConfKeys(PyTorchVersion::Main) },
        { "direct", "no cache: every request is one cudaMalloc, every free one cudaFree", {}, { "alignment" } },
        { "ideal", "lower bound: reserved = live bytes at every instant", {}, { "alignment" } },
        { "first-fit", "coalescing free list; the lowest-addressed free block that fits", {}, kFitKeys },
        { "next-fit", "coalescing free list; first fit from where the last search ended, wrapping once", {},
            kFitKeys },
        { "best-fit", "coalescing free list; the smallest free block that fits", {}, kFitKeys },
        { "worst-fit", "coalescing free list; the largest free block", {}, kFitKeys },
        { "buddy", "binary buddy: power-of-two blocks split in halves and merged with their buddy", {},
            kBuddyKeys },
        { "size-class", "jemalloc-like size classes in slabs, best fit above max_small; reserve:[SIZE:COUNT,...]",
            {}, kSizeClassKeys },
        { "gmlake", "GMLake: PyTorch 2.0 caching allocator with virtual memory stitching of free large blocks", {},
            gmlakeKeys() },
    };
    return infos;
}

PyTorchConfig pytorchConfigFor(const PolicySpec& spec, const PolicyContext& context)
{
    PyTorchConfig config;
    config.version = pytorchVersion(spec);
    if (spec.options.empty() && context.recordedSettings && config.version == PyTorchVersion::Main)
        applyRecordedSettings(config, *context.recordedSettings);
    else
        applyAllocConf(config, spec.options);
    return config;
}

std::unique_ptr<AllocatorPolicy> makePolicy(
    const PolicySpec& spec, SimulatedDevice& device, const PolicyContext& context)
{
    if (spec.policy == "pytorch")
        return std::make_unique<PyTorchPolicy>(device, pytorchConfigFor(spec, context));
    if (spec.policy == "direct") {
        checkNoVersion(spec);
        return std::make_unique<DirectPolicy>(device, alignmentOption(spec, 512));
    }
    if (spec.policy == "ideal") {
        checkNoVersion(spec);
        return std::make_unique<IdealPolicy>(device, alignmentOption(spec, 512));
    }
    if (auto rule = fitRule(spec.policy)) {
        checkNoVersion(spec);
        return std::make_unique<FitPolicy>(device, fitConfig(spec, *rule));
    }
    if (spec.policy == "buddy") {
        checkNoVersion(spec);
        return std::make_unique<BuddyPolicy>(device, buddyConfig(spec));
    }
    if (spec.policy == "size-class") {
        checkNoVersion(spec);
        return std::make_unique<SizeClassPolicy>(device, sizeClassConfig(spec));
    }
    if (spec.policy == "gmlake") {
        checkNoVersion(spec);
        return std::make_unique<GmlakePolicy>(device, gmlakeConfig(spec));
    }
    throw UsageError("unknown policy '" + spec.policy + "'; valid policies: " + policyNames());
}

void validatePolicySpec(const PolicySpec& spec)
{
    SimulatedDevice scratch;
    makePolicy(spec, scratch);
}

} // namespace gpumem::replay
