#include "replay/policy_registry.h"

#include "core/error.h"
#include "replay/policies/buddy_policy.h"
#include "replay/detail/spec_options.h"
#include "replay/policies/cuda_async_policy.h"
#include "replay/policies/compaction_policy.h"
#include "replay/policies/direct_policy.h"
#include "replay/policies/fit_policy.h"
#include "replay/policies/gmlake_policy.h"
#include "replay/policies/ideal_policy.h"
#include "replay/policies/optimal_policy.h"
#include "replay/policies/pytorch_policy.h"
#include "replay/policies/size_class_policy.h"
#include "replay/policies/rmm_arena_policy.h"
#include "replay/policies/rmm_binning_policy.h"
#include "replay/policies/rmm_pool_policy.h"
#include "replay/policies/tf_bfc_policy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>

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

    // compaction[every=N,at=GLOB,order=address|size]:INNER (policy_spec.h, compaction_policy.h).
    std::unique_ptr<AllocatorPolicy> makeCompaction(
        const PolicySpec& spec, SimulatedDevice& device, const PolicyContext& context)
    {
        checkNoVersion(spec);
        if (!spec.inner)
            throw UsageError("compaction wraps another policy; write e.g. compaction:pytorch");
        if (spec.inner->policy == "optimal")
            throw UsageError("compaction:optimal: optimal places every block where it never needs to move; "
                             "compare optimal with compaction:POLICY side by side instead");
        CompactionSchedule schedule;
        bool at = false;
        CompactionOrder order = CompactionOrder::Address;
        for (const auto& [key, value] : spec.params) {
            if (key == "every") {
                auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), schedule.everyRequests);
                if (ec != std::errc() || end != value.data() + value.size() || schedule.everyRequests == 0)
                    throw UsageError("compaction parameter every: '" + value
                        + "' must be a positive number of request events, e.g. compaction[every=1000]:pytorch");
            } else if (key == "at") {
                if (value.empty())
                    throw UsageError("compaction parameter at: give an annotation name pattern, e.g. at=ProfilerStep*");
                schedule.annotationGlob = value;
                at = true;
            } else if (key == "order") {
                if (value != "address" && value != "size")
                    throw UsageError("compaction parameter order: '" + value + "'; valid values: address, size");
                order = value == "size" ? CompactionOrder::SizeDescending : CompactionOrder::Address;
            } else
                throw UsageError("unknown compaction parameter '" + key + "'; valid parameters: every, at, order");
        }
        if (!at && schedule.everyRequests == 0)
            schedule.annotationGlob = "ProfilerStep*";
        else if (!at)
            schedule.annotationGlob.clear();
        return std::make_unique<CompactionPolicy>(makePolicy(*spec.inner, device, context), schedule, order);
    }

    // The named PyTorch releases a spec may give (docs/policies.md "Versions"); each maps to a rule set.
    const std::vector<std::string> kPyTorchReleases = { "1.11", "2.0", "2.5", "2.10" };

    // Fills the rule set of spec.version (or of the recorded release when the spec has none).
    void pytorchVersion(PyTorchConfig& config, const PolicySpec& spec, const PolicyContext& context)
    {
        if (spec.version.empty() || spec.version == "main") {
            if (spec.version.empty() && !context.recordedPyTorchVersion.empty())
                applyRelease(config, context.recordedPyTorchVersion);
            return;
        }
        if (std::find(kPyTorchReleases.begin(), kPyTorchReleases.end(), spec.version) == kPyTorchReleases.end())
            throw UsageError("unknown pytorch version '" + spec.version + "'; valid versions: main (default), "
                + joined(kPyTorchReleases));
        applyRelease(config, spec.version);
    }

    const std::vector<std::string> kFitKeys = { "alignment", "growth_chunk", "growth_chunk_mb", "min_block", "segments" };
    const std::vector<std::string> kBuddyKeys = { "min_order", "min_segment" };
    const std::vector<std::string> kSizeClassKeys = { "max_small", "reserve" };
    const std::vector<std::string> kGmlakeKeys = { "frag_limit", "frag_limit_mb", "reuse_limit" };

    // first-fit, next-fit, best-fit, worst-fit (allocators.md §6 common substrate).
    detail::FreeListConfig fitConfig(const PolicySpec& spec, detail::FitRule rule)
    {
        detail::SpecOptions o(spec, kFitKeys);
        detail::FreeListConfig config;
        config.rule = rule;
        config.alignment = o.powerOfTwo("alignment", config.alignment);
        config.growthChunk = o.size("growth_chunk", config.growthChunk);
        if (o.raw("growth_chunk_mb"))
            config.growthChunk = o.integer("growth_chunk_mb", 1, 1, Bytes(1) << 40) << 20;
        config.minBlock = o.size("min_block", config.alignment);
        config.segments = o.flag("segments", config.segments);
        return config;
    }

    BuddyConfig buddyConfig(const PolicySpec& spec)
    {
        detail::SpecOptions o(spec, kBuddyKeys);
        BuddyConfig config;
        config.minOrder = o.powerOfTwo("min_order", config.minOrder);
        config.minSegment = o.powerOfTwo("min_segment", config.minSegment);
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
            detail::SpecOptions::bad(spec, "reserve", value, form);
        std::vector<std::pair<Bytes, std::uint32_t>> out;
        for (const auto& [size, count] : splitAllocConf(value.substr(1, value.size() - 2))) {
            PolicySpec item = spec;
            item.options = { { "reserve", size }, { "reserve count", count } };
            detail::SpecOptions o(item, { "reserve", "reserve count" });
            out.push_back({ o.size("reserve", 0), std::uint32_t(o.integer("reserve count", 1, 1, 1u << 20)) });
        }
        if (out.empty())
            detail::SpecOptions::bad(spec, "reserve", value, form);
        return out;
    }

    SizeClassConfig sizeClassConfig(const PolicySpec& spec)
    {
        detail::SpecOptions o(spec, kSizeClassKeys);
        SizeClassConfig config;
        config.maxSmall = o.size("max_small", config.maxSmall);
        if (SizeClassPolicy::classSize(config.maxSmall) != config.maxSmall)
            detail::SpecOptions::bad(spec, "max_small", *o.raw("max_small"),
                "must be a size class (512, 1024, 1536, 2048, then 2^g + j*2^(g-2): 1MiB, 1.25MiB, …); "
                "the next one is "
                    + std::to_string(SizeClassPolicy::classSize(config.maxSmall)));
        if (auto reserve = o.raw("reserve"))
            config.reserve = reserveList(spec, *reserve);
        return config;
    }

    std::vector<std::string> gmlakeKeys()
    {
        std::vector<std::string> keys = kGmlakeKeys;
        auto pytorch = allocConfKeys(PyTorchVersion::V2_0);
        keys.insert(keys.end(), pytorch.begin(), pytorch.end());
        return keys;
    }

    // gmlake's own keys; every other key is a pytorch@2.0 option of the allocator underneath.
    GmlakeConfig gmlakeConfig(const PolicySpec& spec)
    {
        detail::SpecOptions o(spec, gmlakeKeys());
        GmlakeConfig config;
        config.fragLimit = o.size("frag_limit", config.fragLimit);
        if (o.raw("frag_limit_mb"))
            config.fragLimit = o.integer("frag_limit_mb", 0, 0, Bytes(1) << 40) << 20;
        config.reuseLimit = o.number("reuse_limit", config.reuseLimit, 1.0, 1e9);
        std::vector<ConfOption> pytorchOptions;
        for (const auto& option : spec.options)
            if (std::find(kGmlakeKeys.begin(), kGmlakeKeys.end(), option.first) == kGmlakeKeys.end())
                pytorchOptions.push_back(option);
        try {
            applyAllocConf(config.pytorch, pytorchOptions);
        } catch (const UsageError& e) {
            throw UsageError(std::string(e.what()) + " (gmlake also takes " + joined(kGmlakeKeys) + ")");
        }
        return config;
    }

    std::optional<detail::FitRule> fitRule(const std::string& name)
    {
        for (auto rule : { detail::FitRule::First, detail::FitRule::Next, detail::FitRule::Best, detail::FitRule::Worst })
            if (name == detail::toString(rule))
                return rule;
        return std::nullopt;
    }

    // The options of tf-bfc, rmm-pool, rmm-arena, rmm-binning and cuda-async (docs/policies.md).
    const std::vector<std::string> kTfBfcKeys = { "allow_growth", "garbage_collection",
        "max_internal_fragmentation_bytes", "fragmentation_fraction", "memory_limit" };
    const std::vector<std::string> kRmmPoolKeys = { "initial_pool_size", "maximum_pool_size" };
    const std::vector<std::string> kRmmBinningKeys = { "min_exp", "max_exp", "initial_pool_size", "maximum_pool_size" };

    RmmPoolConfig rmmPoolConfig(const detail::SpecOptions& o)
    {
        RmmPoolConfig c;
        if (o.raw("initial_pool_size"))
            c.initialPoolSize = o.bytes("initial_pool_size", 0, RmmPoolPolicy::kAlignment);
        if (o.raw("maximum_pool_size"))
            c.maximumPoolSize = o.bytes("maximum_pool_size", 0, RmmPoolPolicy::kAlignment);
        return c;
    }

    std::unique_ptr<AllocatorPolicy> makeTfBfc(const PolicySpec& spec, SimulatedDevice& device)
    {
        checkNoVersion(spec);
        detail::SpecOptions o(spec, kTfBfcKeys);
        TfBfcConfig c;
        c.allowGrowth = o.flag("allow_growth", c.allowGrowth);
        c.garbageCollection = o.flag("garbage_collection", c.garbageCollection);
        c.maxInternalFragmentation = o.bytes("max_internal_fragmentation_bytes", c.maxInternalFragmentation);
        c.fragmentationFraction = o.number("fragmentation_fraction", 0.0, 0.0, 1.0);
        c.memoryLimit = o.bytes("memory_limit", 0);
        return std::make_unique<TfBfcPolicy>(device, c);
    }

    RmmPoolVersion rmmPoolVersion(const PolicySpec& spec)
    {
        if (spec.version.empty())
            return RmmPoolVersion::Main;
        if (spec.version == "23.02")
            return RmmPoolVersion::V23_02;
        if (spec.version == "0.15")
            return RmmPoolVersion::V0_15;
        throw UsageError("unknown rmm-pool version '" + spec.version + "'; valid versions: 23.02, 0.15");
    }

    std::unique_ptr<AllocatorPolicy> makeRmm(const PolicySpec& spec, SimulatedDevice& device, const PolicyContext& context)
    {
        if (spec.policy == "rmm-pool") {
            RmmPoolConfig c = rmmPoolConfig(detail::SpecOptions(spec, kRmmPoolKeys));
            c.version = rmmPoolVersion(spec);
            // Only checking the spec: the 23.02 default initial pool depends on the replay's device, which
            // is not known yet; checking it on a scratch 80 GiB device refused every maximum below 40 GiB.
            if (!context.deviceKnown && !c.initialPoolSize)
                c.initialPoolSize = 0;
            return std::make_unique<RmmPoolPolicy>(device, c);
        }
        checkNoVersion(spec);
        if (spec.policy == "rmm-arena") {
            detail::SpecOptions o(spec, { "arena_size" });
            return std::make_unique<RmmArenaPolicy>(device, RmmArenaConfig { o.bytes("arena_size", 0) });
        }
        detail::SpecOptions o(spec, kRmmBinningKeys);
        RmmBinningConfig c;
        c.minExp = unsigned(o.integer("min_exp", c.minExp, 8, 40));
        c.maxExp = unsigned(o.integer("max_exp", c.maxExp, 8, 40));
        c.pool = rmmPoolConfig(o);
        return std::make_unique<RmmBinningPolicy>(device, c);
    }

    std::unique_ptr<AllocatorPolicy> makeCudaAsync(const PolicySpec& spec, SimulatedDevice& device)
    {
        checkNoVersion(spec);
        detail::SpecOptions o(spec, { "release_threshold", "oom_retry" });
        CudaAsyncConfig c;
        if (o.raw("release_threshold") != "max")
            c.releaseThreshold = o.bytes("release_threshold", c.releaseThreshold);
        c.oomRetry = o.flag("oom_retry", c.oomRetry);
        return std::make_unique<CudaAsyncPolicy>(device, c);
    }

    // pytorch[@V]:backend:cudaMallocAsync (allocators.md §4, PyTorch c10/cuda/CUDAMallocAsyncAllocator.cpp):
    // the device's default pool with the release threshold at UINT64_MAX; per_process_memory_fraction
    // limits PyTorch's own count of live bytes; max_split_size_mb, roundup_power2_divisions,
    // garbage_collection_threshold and expandable_segments have no effect on this backend.
    std::unique_ptr<AllocatorPolicy> makePyTorchAsync(
        const PolicySpec& spec, const PyTorchConfig& config, SimulatedDevice& device)
    {
        CudaAsyncConfig c;
        c.oomRetry = config.asyncOomRetry;
        if (config.fractionSet && config.perProcessMemoryFraction < 1.0)
            c.usedLimit = std::max<Bytes>(1, Bytes(config.perProcessMemoryFraction * double(device.totalMemory())));
        std::string name = config.release.empty() ? "pytorch" : "pytorch@" + config.release;
        name += ":backend:cudaMallocAsync";
        if (c.usedLimit != 0) {
            for (const auto& [key, value] : spec.options)
                if (key == "per_process_memory_fraction")
                    name += ",per_process_memory_fraction:" + value;
        }
        if (config.asyncOomRetryGiven)
            name += std::string(",async_oom_retry:") + (config.asyncOomRetry ? "True" : "False");
        c.displayName = name;
        return std::make_unique<CudaAsyncPolicy>(device, c);
    }

} // namespace

const std::vector<PolicyInfo>& registeredPolicies()
{
    static const std::vector<PolicyInfo> infos = {
        { "pytorch", "PyTorch CUDACachingAllocator (native backend); options in PYTORCH_CUDA_ALLOC_CONF syntax",
            kPyTorchReleases, allocConfKeys(PyTorchVersion::Main) },
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
        { "tf-bfc", "TensorFlow/XLA BFC allocator: 21 bins, 256 B rounding, region growth by Extend", {}, kTfBfcKeys },
        { "rmm-pool", "RAPIDS RMM pool_memory_resource: per-stream coalescing best-fit lists, geometric growth",
            { "23.02", "0.15" }, kRmmPoolKeys },
        { "rmm-arena", "RAPIDS RMM arena_memory_resource: one arena, 1 MiB superblocks, per-stream arenas", {},
            { "arena_size" } },
        { "rmm-binning", "RAPIDS RMM binning_memory_resource: fixed-size bins 2^18..2^22 over an rmm-pool", {},
            kRmmBinningKeys },
        { "cuda-async", "cudaMallocAsync memory pool (approximation): best fit, 2 MiB-granular growth", {},
            { "release_threshold", "oom_retry" } },
        { "optimal", "offline plan (greedy by size over the whole trace): the arena a policy knowing the future needs",
            {}, { "alignment" } },
        { "compaction", "wrapper: compaction[every=N,at=GLOB,order=address|size]:INNER moves live blocks to close holes",
            {}, { "every", "at", "order" } },
    };
    return infos;
}

PyTorchConfig pytorchConfigFor(const PolicySpec& spec, const PolicyContext& context)
{
    PyTorchConfig config;
    pytorchVersion(config, spec, context);
    if (spec.options.empty() && context.recordedSettings && (spec.version.empty() || spec.version == "main"))
        applyRecordedSettings(config, *context.recordedSettings);
    else
        applyAllocConf(config, spec.options);
    // The backend came with PyTorch 2.0 (PR #82682); 1.x has none.
    if (config.asyncBackend && config.release.starts_with("1."))
        throw UsageError("pytorch@" + config.release + ": backend:cudaMallocAsync first appeared in PyTorch 2.0");
    // PR #188110 (June 2026) postdates every named release: their cudaMallocAsync backend raises at once.
    if (!config.asyncOomRetryGiven && !config.release.empty())
        config.asyncOomRetry = false;
    return config;
}

PolicyContext policyContextOf(const nlohmann::json& metadata)
{
    PolicyContext context;
    if (auto it = metadata.find("allocator_settings"); it != metadata.end() && it->is_object())
        context.recordedSettings = &*it;
    if (auto it = metadata.find("pytorch_version"); it != metadata.end() && it->is_string())
        context.recordedPyTorchVersion = it->get<std::string>();
    return context;
}

std::string approximationOf(const PolicySpec& spec)
{
    const PolicySpec* base = &spec;
    while (base->inner)
        base = base->inner.get();
    const bool async = base->policy == "cuda-async"
        || (base->policy == "pytorch"
            && std::any_of(base->options.begin(), base->options.end(),
                [](const ConfOption& o) { return o.first == "backend" && o.second == "cudaMallocAsync"; }));
    if (!async)
        return {};
    return "CUDA does not document its pool's placement, rounding or growth; modelled as best fit in 2 MiB "
           "chunks (allocators.md §4)";
}

std::unique_ptr<AllocatorPolicy> makePolicy(
    const PolicySpec& spec, SimulatedDevice& device, const PolicyContext& context)
{
    if (!spec.params.empty() && !isWrapperPolicy(spec.policy))
        throw UsageError("policy " + spec.policy + " takes no [...] parameters (only wrappers such as compaction[every=N]:"
            + spec.policy + " do)");
    if (spec.policy == "compaction")
        return makeCompaction(spec, device, context);
    if (spec.policy == "pytorch") {
        PyTorchConfig config = pytorchConfigFor(spec, context);
        if (config.asyncBackend)
            return makePyTorchAsync(spec, config, device);
        return std::make_unique<PyTorchPolicy>(device, config);
    }
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
    if (spec.policy == "tf-bfc")
        return makeTfBfc(spec, device);
    if (spec.policy == "rmm-pool" || spec.policy == "rmm-arena" || spec.policy == "rmm-binning")
        return makeRmm(spec, device, context);
    if (spec.policy == "cuda-async")
        return makeCudaAsync(spec, device);
    if (spec.policy == "optimal") {
        checkNoVersion(spec);
        return std::make_unique<OptimalPolicy>(device, alignmentOption(spec, 512));
    }
    throw UsageError("unknown policy '" + spec.policy + "'; valid policies: " + policyNames());
}

void validatePolicySpec(const PolicySpec& spec)
{
    SimulatedDevice scratch;
    PolicyContext context;
    context.deviceKnown = false;
    makePolicy(spec, scratch, context);
}

} // namespace gpumem::replay
