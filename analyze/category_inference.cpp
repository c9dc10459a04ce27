#include "analyze/category_inference.h"

#include "core/byte_total.h"
#include "core/display_width.h"
#include "core/units.h"

#include <algorithm>
#include <cstdio>
#include <limits>

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

Category inferCategory(const StepSet& steps, const BlockLife& life)
{
    const auto [a, step] = phaseAt(steps, life.allocTime);
    const auto& freeTime = life.freeTime;
    const auto [f, freeStep] = freeTime ? phaseAt(steps, *freeTime) : std::make_pair(Phase::After, steps.steps.size());
    // Op-local only within one phase of one step; in backward PyTorch files even op-local blocks
    // under autograd_detail (the autograd engine made them).
    if (life.opLocal && freeTime && a != Phase::Setup && a != Phase::Backward && f == a && freeStep == step)
        return Category::Temporary;
    const bool freedInStep = freeTime && step < steps.steps.size() && *freeTime < steps.steps[step].end;
    switch (a) {
    case Phase::Setup:
        return freeTime && f == Phase::Setup && freeStep == step ? Category::Temporary : Category::Parameter;
    case Phase::Forward:
        return Category::Activation;
    case Phase::Backward:
        return freedInStep && f == Phase::Backward ? Category::AutogradDetail : Category::Gradient;
    case Phase::Optimizer:
        return freedInStep ? Category::Temporary : Category::OptimizerState;
    case Phase::After:
        return freeTime ? Category::Temporary : Category::Unknown;
    }
    return Category::Unknown;
}

std::vector<Category> inferCategories(const Trace& trace, const StepSet& steps)
{
    const auto& m = trace.memory();
    const std::size_t n = m.count();
    auto allocations = trace.allocations();
    const auto allocsBefore = allocsBeforeEachEvent(trace); // to tell op-local blocks
    std::vector<std::uint32_t> closedBy(n, std::numeric_limits<std::uint32_t>::max()); // free event → allocation
    for (std::size_t k = 0; k < allocations.size(); ++k)
        if (allocations[k].freeEvent != kNoIndex && allocations[k].allocEvent != kNoIndex)
            closedBy[allocations[k].freeEvent] = static_cast<std::uint32_t>(k);
    // Allocations in alloc-event order, so a continued lifetime's origin is resolved first.
    std::vector<std::uint32_t> order;
    order.reserve(allocations.size());
    for (std::size_t k = 0; k < allocations.size(); ++k)
        if (allocations[k].allocEvent != kNoIndex)
            order.push_back(static_cast<std::uint32_t>(k));
    auto byAllocEvent = [&](std::uint32_t x, std::uint32_t y) { return allocations[x].allocEvent < allocations[y].allocEvent; };
    if (!std::is_sorted(order.begin(), order.end(), byAllocEvent)) // pairing usually yields them in order already
        std::sort(order.begin(), order.end(), byAllocEvent);
    std::vector<TimeNs> origin(allocations.size(), 0);
    std::vector<Category> out(allocations.size(), Category::Unknown);
    for (auto k : order) {
        const auto& a = allocations[k];
        const auto i = a.allocEvent;
        origin[k] = m.time[i];
        for (std::uint64_t j = i; j-- > 0 && m.time[j] == m.time[i];) {
            if (m.kind[j] == EventKind::Free && m.address[j] == m.address[i] && m.size[j] == m.size[i] && m.device[j] == m.device[i]
                && closedBy[j] != std::numeric_limits<std::uint32_t>::max()) {
                origin[k] = origin[closedBy[j]];
                break;
            }
        }
        BlockLife life;
        life.allocTime = origin[k];
        if (a.freeEvent != kNoIndex) {
            life.freeTime = m.time[a.freeEvent];
            life.opLocal = origin[k] == m.time[i] && allocsBefore[a.freeEvent] == allocsBefore[i] + 1;
        }
        out[k] = inferCategory(steps, life);
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
        addToAgreement(r, m.size[allocations[i].allocEvent], recorded[i], inferred[i]);
    }
    return r;
}

std::vector<CategoryRecall> perCategoryAgreement(const CategoryAgreement& agreement)
{
    std::vector<CategoryRecall> rows;
    for (int r = 0; r < kCategoryCount; ++r) {
        CategoryRecall row;
        row.recorded = static_cast<Category>(r);
        row.mostlyInferredAs = row.recorded;
        for (int i = 0; i < kCategoryCount; ++i) {
            const Bytes cell = agreement.confusion[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
            row.bytes = addSaturated(row.bytes, cell);
            if (i == r)
                row.agreeing = cell;
            else if (cell > row.mostlyInferredBytes) {
                row.mostlyInferredBytes = cell;
                row.mostlyInferredAs = static_cast<Category>(i);
            }
        }
        if (row.bytes)
            rows.push_back(row);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const CategoryRecall& a, const CategoryRecall& b) {
        if ((a.recorded == Category::Unknown) != (b.recorded == Category::Unknown))
            return b.recorded == Category::Unknown;
        return a.bytes > b.bytes;
    });
    return rows;
}

std::string categoryAgreementTable(const CategoryAgreement& agreement)
{
    std::string out = padRight("recorded", 17) + padLeft("bytes", 12) + padLeft("agree", 9) + "  the rest mostly inferred as\n";
    for (const auto& r : perCategoryAgreement(agreement)) {
        char share[32];
        std::snprintf(share, sizeof share, "%.1f %%", 100.0 * r.share());
        std::string rest = r.mostlyInferredBytes
            ? std::string(toString(r.mostlyInferredAs)) + " (" + formatBytes(r.mostlyInferredBytes) + ")"
            : std::string("-");
        out += padRight(toString(r.recorded), 17) + padLeft(formatBytes(r.bytes), 12) + padLeft(share, 9) + "  " + rest + "\n";
    }
    return out;
}

} // namespace gpumem::analyze
