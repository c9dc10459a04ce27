#pragma once
// Every policy the replay engine knows, by name (design.md §5: adding a policy = its class, one line
// here, one line in the typed conformance suite). makePolicy() validates a PolicySpec completely and
// builds the policy on a device the caller owns. Stateless; thread-safe.
#include "replay/allocator_policy.h"
#include "replay/policy_spec.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>

namespace gpumem::replay {

struct PolicyInfo {
    std::string name;
    std::string summary;
    std::vector<std::string> versions; // besides the default (newest) rules
    std::vector<std::string> options; // valid option keys
};

// The registered policies, in display order.
const std::vector<PolicyInfo>& registeredPolicies();

// What a trace can tell a policy: the allocator settings it recorded (a snapshot's
// allocator_settings object, or null). A `pytorch` spec without options uses them.
struct PolicyContext {
    const nlohmann::json* recordedSettings = nullptr;
    // False while only checking a spec (validatePolicySpec: no trace, no device yet). A default that RMM
    // derives from the device (rmm-pool@23.02's initial pool, min(free, total/2)) is then not checked
    // against the spec's maximum_pool_size: that check belongs to the replay's device (issue 19).
    bool deviceKnown = true;
    // The PyTorch version the trace recorded (metadata "pytorch_version", e.g. "2.10.0+cu130"); empty =
    // unknown. A `pytorch` spec without '@' replays with that version's rules (docs/policies.md).
    std::string recordedPyTorchVersion {};
};

// Builds the policy. Throws UsageError naming the valid choices on an unknown policy, version,
// option or a bad value.
std::unique_ptr<AllocatorPolicy> makePolicy(
    const PolicySpec& spec, SimulatedDevice& device, const PolicyContext& context = {});

// The same checks without building anything (a CLI's parse-only setup).
void validatePolicySpec(const PolicySpec& spec);

// The context a trace's metadata gives: "allocator_settings" (an object) and "pytorch_version" (a string).
// `metadata` must outlive the context.
PolicyContext policyContextOf(const nlohmann::json& metadata);

// Why a spec's replay is an approximation of the allocator it names, in words (its output rows say so);
// empty when the policy follows its allocator's source. Today: cuda-async and pytorch:backend:cudaMallocAsync
// (CUDA's pool internals are undocumented, allocators.md §4), also inside a wrapper.
std::string approximationOf(const PolicySpec& spec);

// The PyTorch settings a `pytorch[@V][:…]` spec selects (recorded settings applied when the spec has
// no options). Throws UsageError like makePolicy.
PyTorchConfig pytorchConfigFor(const PolicySpec& spec, const PolicyContext& context = {});

} // namespace gpumem::replay
