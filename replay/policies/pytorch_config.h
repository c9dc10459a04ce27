#pragma once
// The settings of PyTorch's CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF) and the size rules that
// depend on them: round_size, the roundup_power2_divisions lookup, pool choice and segment size.
// Every rule cites allocators.md §1 and the PyTorch file it paraphrases. Plain value type.
#include "core/types.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumem::replay {

inline constexpr Bytes kMiB = Bytes(1) << 20;
inline constexpr Bytes kMinBlockSize = 512; // kMinBlockSize, allocators.md §0
inline constexpr Bytes kSmallSize = kMiB; // kSmallSize: rounded <= 1 MiB is small
inline constexpr Bytes kSmallBuffer = 2 * kMiB; // small segment size
inline constexpr Bytes kMinLargeAlloc = 10 * kMiB; // below it the large segment size is used
inline constexpr Bytes kRoundLarge = 2 * kMiB; // rounding of large segments >= 10 MiB
inline constexpr Bytes kUnlimited = std::numeric_limits<Bytes>::max();
inline constexpr std::size_t kRoundupIntervals = 16; // roundup_power2_divisions table size (§1.3)

// Which allocator revision's rules apply (allocators.md §1 intro and §1.14). Named releases map onto
// these: 1.11 and 2.0 use V2_0 (1.11 with the global event queue), 2.5, 2.10 and main use Main.
enum class PyTorchVersion : std::uint8_t { Main = 0, V2_0 = 1 };

struct PyTorchConfig {
    PyTorchVersion version = PyTorchVersion::Main; // the rule set
    // The release the spec or the trace names (`pytorch@2.10`, a recorded "2.7.1"), as major.minor; empty
    // = main. Several releases share a rule set (docs/policies.md "Versions").
    std::string release {};
    // Before PyTorch PR #71745 (CUDACachingAllocator: Keep one event queue per stream, 2022; @1.11): the
    // cross-stream end-of-life events of record_stream'd blocks sat in one global FIFO (process_events
    // stopped at the first event not yet complete), so a block's free completes only when every block
    // queued before it has completed. After it, one FIFO per stream, which a recorded trace already shows.
    bool globalEventQueue = false;
    Bytes maxSplitSize = kUnlimited; // max_split_size_mb
    Bytes maxNonSplitRounding = 20 * kMiB; // max_non_split_rounding_mb (2.0: fixed kLargeBuffer)
    Bytes largeSegmentSize = 20 * kMiB; // large_segment_size_mb (2.0: fixed kLargeBuffer)
    std::array<std::uint64_t, kRoundupIntervals> roundupDivisions {}; // 0 = no power-2 rounding
    double garbageCollectionThreshold = 0.0; // (0,1); 0 = off
    bool expandableSegments = false;
    double perProcessMemoryFraction = 1.0; // < 1 sets allowed_memory_maximum
    bool fractionSet = false; // PyTorch set_fraction
    bool throwOnCudaMallocOom = false;
    // backend:cudaMallocAsync (allocators.md §4): the CUDA pool replaces the caching allocator; only
    // per_process_memory_fraction still applies, the other size options are ignored as PyTorch ignores
    // them (with a warning). asyncOomRetry: gpumem's own key async_oom_retry (not PyTorch's): the
    // sync-trim-retry on OOM of PyTorch PR #188110, on by default for main, off for the named versions,
    // which predate it (docs/policies.md).
    bool asyncBackend = false;
    bool asyncOomRetry = true;
    bool asyncOomRetryGiven = false;

    // round_size (allocators.md §1.2; c10/cuda/CUDACachingAllocator.cpp round_size and
    // roundup_power2_next_division). n > 0.
    Bytes roundSize(Bytes n) const;
    // roundup_power2_divisions(size) lookup: index clamp(floor(log2 n) − 20, 0, 15) (§1.3).
    std::uint64_t divisionsFor(Bytes n) const;
    // get_allocation_size (§1.4): the cudaMalloc size for a rounded request.
    Bytes allocationSize(Bytes rounded) const;
    static bool isSmall(Bytes rounded) { return rounded <= kSmallSize; }
    // garbage collection is enabled (§1.9): a fraction is set and the threshold > 0.
    bool gcEnabled() const { return fractionSet && garbageCollectionThreshold > 0.0; }

    // The PYTORCH_CUDA_ALLOC_CONF form of these settings (only non-defaults), e.g.
    // "expandable_segments:True,max_split_size_mb:128".
    std::string toString() const;
    friend bool operator==(const PyTorchConfig&, const PyTorchConfig&) = default;
};

// One `key:value` of PYTORCH_CUDA_ALLOC_CONF.
using ConfOption = std::pair<std::string, std::string>;

// Splits "k1:v1,k2:[a:b,c:d]" into pairs (whitespace ignored, list values kept with their brackets).
// Throws UsageError on an unbalanced bracket or an item without ':'.
std::vector<ConfOption> splitAllocConf(std::string_view text);

// Applies options in order to `config` (§1.13 table; 2.0 rules from §1.14 when config.version is
// V2_0). Unknown keys and bad values throw UsageError listing the valid keys or the allowed values.
// Host-only and lock options are accepted and ignored (they do not change placement).
void applyAllocConf(PyTorchConfig& config, const std::vector<ConfOption>& options);

// The settings recorded in a snapshot's `allocator_settings` (§1.15.7): max_split_size (bytes, −1 =
// unlimited), garbage_collection_threshold, expandable_segments, roundup_power2_divisions (dict keyed
// by the interval's lower bound in MiB). Missing keys keep their defaults; wrong types are ignored.
void applyRecordedSettings(PyTorchConfig& config, const nlohmann::json& settings);

// The rule set of PyTorch release `release` ("2.10", "2.7.1+cu121", …) by its major.minor: before 1.12 the
// 1.11 rules (global event queue), before 2.1 the 2.0 rules (no expandable segments, PR #96995 is 2.1),
// otherwise main's. Fills version, release ("major.minor") and globalEventQueue; false when `release`
// does not start with a number "MAJOR.MINOR".
bool applyRelease(PyTorchConfig& config, std::string_view release);

// The option keys applyAllocConf accepts, for error messages and `gpumem help replay`.
std::vector<std::string> allocConfKeys(PyTorchVersion version);

} // namespace gpumem::replay
