#include "replay/policy_registry.h"

#include "core/error.h"
#include "replay/policies/direct_policy.h"
#include "replay/policies/ideal_policy.h"
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
    throw UsageError("unknown policy '" + spec.policy + "'; valid policies: " + policyNames());
}

void validatePolicySpec(const PolicySpec& spec)
{
    SimulatedDevice scratch;
    makePolicy(spec, scratch);
}

} // namespace gpumem::replay
