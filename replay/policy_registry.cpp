#include "replay/policy_registry.h"

#include "core/error.h"
#include "replay/policies/compaction_policy.h"
#include "replay/policies/direct_policy.h"
#include "replay/policies/ideal_policy.h"
#include "replay/policies/optimal_policy.h"
#include "replay/policies/pytorch_policy.h"

#include <nlohmann/json.hpp>

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

    PyTorchVersion pytorchVersion(const PolicySpec& spec)
    {
        if (spec.version.empty() || spec.version == "main")
            return PyTorchVersion::Main;
        if (spec.version == "2.0")
            return PyTorchVersion::V2_0;
        throw UsageError("unknown pytorch version '" + spec.version + "'; valid versions: main (default), 2.0");
    }

} // namespace

const std::vector<PolicyInfo>& registeredPolicies()
{
    static const std::vector<PolicyInfo> infos = {
        { "pytorch", "PyTorch CUDACachingAllocator (native backend); options in PYTORCH_CUDA_ALLOC_CONF syntax",
            { "2.0" }, allocConfKeys(PyTorchVersion::Main) },
        { "direct", "no cache: every request is one cudaMalloc, every free one cudaFree", {}, { "alignment" } },
        { "ideal", "lower bound: reserved = live bytes at every instant", {}, { "alignment" } },
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
    if (!spec.params.empty() && !isWrapperPolicy(spec.policy))
        throw UsageError("policy " + spec.policy + " takes no [...] parameters (only wrappers such as compaction[every=N]:"
            + spec.policy + " do)");
    if (spec.policy == "compaction")
        return makeCompaction(spec, device, context);
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
    if (spec.policy == "optimal") {
        checkNoVersion(spec);
        return std::make_unique<OptimalPolicy>(device, alignmentOption(spec, 512));
    }
    throw UsageError("unknown policy '" + spec.policy + "'; valid policies: " + policyNames());
}

void validatePolicySpec(const PolicySpec& spec)
{
    SimulatedDevice scratch;
    makePolicy(spec, scratch);
}

} // namespace gpumem::replay
