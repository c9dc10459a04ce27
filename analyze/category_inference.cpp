#include "analyze/category_inference.h"

#include <algorithm>

namespace gpumem::analyze {

std::string_view toString(Phase phase)
{
    switch (phase) {
    case Phase::Setup: return "setup";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
    case Phase::After: return "after";
    }
    return "?";
}

std::pair<Phase, std::size_t> phaseAt(const StepSet& set, TimeNs t)
{
    const auto& steps = set.steps;
    if (steps.empty() || t < steps.front().start)
        return { Phase::Setup, steps.size() };
    auto it = std::upper_bound(steps.begin(), steps.end(), t, [](TimeNs x, const Step& s) { return x < s.start; });
    const auto k = static_cast<std::size_t>(it - steps.begin()) - 1;
    const Step& s = steps[k];
    if (t >= s.end)
        return { k + 1 == steps.size() ? Phase::After : Phase::Setup, steps.size() }; // a gap between steps counts as setup
    if (s.optimizerStart && t >= *s.optimizerStart)
        return { Phase::Optimizer, k };
    if (t >= s.backwardStart)
        return { Phase::Backward, k };
    return { Phase::Forward, k };
}

Category inferCategory(const StepSet& steps, TimeNs allocTime, std::optional<TimeNs> freeTime)
{
    const auto [a, step] = phaseAt(steps, allocTime);
    const bool freedInStep = freeTime && step < steps.steps.size() && *freeTime < steps.steps[step].end;
    const Phase f = freeTime ? phaseAt(steps, *freeTime).first : Phase::After;
    switch (a) {
    case Phase::Setup:
        return freeTime && f == Phase::Setup && phaseAt(steps, *freeTime).second == step ? Category::Temporary : Category::Parameter;
    case Phase::Optimizer:
        return freedInStep ? Category::Temporary : Category::OptimizerState;
    case Phase::Backward:
        return freedInStep && f == Phase::Backward ? Category::Temporary : Category::Gradient;
    case Phase::Forward:
        return freedInStep && f == Phase::Forward ? Category::Temporary : Category::Activation;
    case Phase::After:
        return freeTime ? Category::Temporary : Category::Unknown;
    }
    return Category::Unknown;
}

std::vector<Category> inferCategories(const Trace& trace, const StepSet& steps)
{
    const auto& m = trace.memory();
    auto allocations = trace.allocations();
    std::vector<Category> out(allocations.size(), Category::Unknown);
    for (std::size_t i = 0; i < allocations.size(); ++i) {
        const auto& a = allocations[i];
        if (a.allocEvent == kNoIndex)
            continue;
        std::optional<TimeNs> freeTime;
        if (a.freeEvent != kNoIndex)
            freeTime = m.time[a.freeEvent];
        out[i] = inferCategory(steps, m.time[a.allocEvent], freeTime);
    }
    return out;
}

std::vector<Category> recordedCategories(const Trace& trace)
{
    const auto& m = trace.memory();
    auto allocations = trace.allocations();
    std::vector<Category> out(allocations.size(), Category::Unknown);
    for (std::size_t i = 0; i < allocations.size(); ++i)
        if (allocations[i].allocEvent != kNoIndex)
            out[i] = m.category[allocations[i].allocEvent];
    return out;
}

bool hasRecordedCategories(const Trace& trace)
{
    const auto& m = trace.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        if (m.kind[i] == EventKind::Alloc && m.category[i] != Category::Unknown)
            return true;
    return false;
}

CategoryAgreement compareCategories(const Trace& trace, std::span<const Category> recorded,
    std::span<const Category> inferred, std::span<const std::size_t> indices)
{
    CategoryAgreement r;
    const auto& m = trace.memory();
    auto allocations = trace.allocations();
    for (auto i : indices) {
        if (i >= allocations.size() || allocations[i].allocEvent == kNoIndex)
            continue;
        const Bytes size = m.size[allocations[i].allocEvent];
        const auto rec = recorded[i], inf = inferred[i];
        r.confusion[static_cast<std::size_t>(rec)][static_cast<std::size_t>(inf)] += size;
        if (rec == Category::Unknown) {
            r.recordedUnknownBytes += size;
            continue;
        }
        r.comparedBytes += size;
        if (rec == inf)
            r.agreeingBytes += size;
    }
    return r;
}

} // namespace gpumem::analyze
