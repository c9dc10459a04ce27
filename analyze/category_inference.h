#pragma once
// Infers tensor categories (PyTorch's names: parameter, optimizer state, gradient, activation,
// temporary) for traces that recorded none, from each block's lifetime relative to the training
// steps and their forward/backward/optimizer phases (analyze/steps.h). The rules are in
// docs/analysis.md §Category inference and summarized at inferCategory(); their accuracy is measured
// against PyTorch's own categories (HTA memory_timeline.raw.gz) by compareCategories().
// Pure functions of their inputs; thread-safe.
#include "analyze/steps.h"
#include "core/byte_total.h"

#include <array>
#include <span>
#include <vector>

namespace gpumem::analyze {

enum class Phase : std::uint8_t { Setup, Forward, Backward, Optimizer, After };
std::string_view toString(Phase phase);

// The phase of time t and the index of the step holding it (steps.size() for Setup/After).
std::pair<Phase, std::size_t> phaseAt(const StepSet& steps, TimeNs t);

// Rules (docs/analysis.md §Category inference). A = phase of the alloc; "survives" = still live when
// its phase ends (for Backward: freed in the optimizer phase or later); "op-local" = freed in the
// phase of its alloc with no other block allocated on the device meanwhile (the tensor was made and
// dropped inside one op, which is what PyTorch's profiler calls temporary):
//   op-local, A ∉ {Setup, Backward} → temporary
//   A=Setup:     freed in Setup → temporary; otherwise (lives into the steps) → parameter
//   A=Forward:   → activation (PyTorch files every forward output under autograd as an activation)
//   A=Backward:  survives → gradient; otherwise → autograd_detail
//   A=Optimizer: survives the step → optimizer_state; otherwise → temporary
//   A=After:     → temporary when freed, else unknown
// A block allocated at the same instant and address, with the same size, as a block just freed
// continues that block's lifetime (the memory-timeline importer closes and reopens a tensor when its
// version is bumped) and takes the phase of the first alloc.
struct BlockLife {
    TimeNs allocTime = 0;              // of the first alloc of the (continued) lifetime
    std::optional<TimeNs> freeTime;    // of this block's free; nullopt if never freed
    bool opLocal = false;
};
Category inferCategory(const StepSet& steps, const BlockLife& life);

// One category per allocation (same order as trace.allocations()); allocations without an alloc
// event (freed but allocated before the window) get Unknown.
std::vector<Category> inferCategories(const Trace& trace, const StepSet& steps);

// The category recorded on each allocation's alloc event.
std::vector<Category> recordedCategories(const Trace& trace);
// True when any alloc event carries a category other than Unknown.
bool hasRecordedCategories(const Trace& trace);

struct CategoryAgreement {
    Bytes comparedBytes = 0;        // bytes whose recorded category is known
    Bytes agreeingBytes = 0;        // of those, inferred == recorded
    Bytes recordedUnknownBytes = 0; // bytes left out because PyTorch itself said unknown
    // confusion[recorded][inferred] in bytes.
    std::array<std::array<Bytes, kCategoryCount>, kCategoryCount> confusion {};
    double share() const { return comparedBytes ? static_cast<double>(agreeingBytes) / static_cast<double>(comparedBytes) : 0.0; }
};

// Agreement for one recorded category (a row of CategoryAgreement::confusion): its bytes, those inferred
// the same, and the other category most of the rest was inferred as.
struct CategoryRecall {
    Category recorded = Category::Unknown;
    Bytes bytes = 0, agreeing = 0;
    Category mostlyInferredAs = Category::Unknown; // among the disagreeing bytes; == recorded when none
    Bytes mostlyInferredBytes = 0;
    double share() const { return bytes ? static_cast<double>(agreeing) / static_cast<double>(bytes) : 0.0; }
};
// One row per recorded category with bytes (PyTorch's "unknown" included, last), by bytes descending.
std::vector<CategoryRecall> perCategoryAgreement(const CategoryAgreement& agreement);
// The rows as a text table within 100 columns: category, bytes, agreement, what the rest was inferred as.
std::string categoryAgreementTable(const CategoryAgreement& agreement);

// Compares inferred with recorded categories on the given allocations (indices into
// trace.allocations()), weighting each by its size.
CategoryAgreement compareCategories(const Trace& trace, std::span<const Category> recorded,
    std::span<const Category> inferred, std::span<const std::size_t> allocations);
// Counts one block of `size` bytes recorded as `recorded` and inferred as `inferred` (compareCategories' step).
// Inline: the bounded analysis calls it at every free (issue 22).
[[gnu::always_inline]] inline void addToAgreement(CategoryAgreement& r, Bytes size, Category rec, Category inf)
{
    auto& cell = r.confusion[static_cast<std::size_t>(rec)][static_cast<std::size_t>(inf)];
    cell = addSaturated(cell, size); // core/byte_total.h: no wrapped sums
    if (rec == Category::Unknown) {
        r.recordedUnknownBytes = addSaturated(r.recordedUnknownBytes, size);
        return;
    }
    r.comparedBytes = addSaturated(r.comparedBytes, size);
    if (rec == inf)
        r.agreeingBytes = addSaturated(r.agreeingBytes, size);
}

} // namespace gpumem::analyze
