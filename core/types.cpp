#include "core/types.h"

#include <array>

namespace gpumem {
namespace {
    template <typename E, std::size_t N>
    std::optional<E> lookup(const std::array<std::string_view, N>& names, std::string_view name)
    {
        for (std::size_t i = 0; i < N; ++i)
            if (names[i] == name)
                return static_cast<E>(i);
        return std::nullopt;
    }
    template <std::size_t N, typename E> std::string_view nameOf(const std::array<std::string_view, N>& names, E value)
    {
        auto i = static_cast<std::size_t>(value);
        return i < N ? names[i] : std::string_view("invalid");
    }

    constexpr std::array<std::string_view, kEventKindCount> kEventKindNames = { "alloc", "free", "free_completed",
        "segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom", "marker", "empty_cache" };
    constexpr std::array<std::string_view, kCategoryCount> kCategoryNames = { "unknown", "parameter", "gradient",
        "activation", "optimizer_state", "input", "temporary", "autograd_detail" };
    constexpr std::array<std::string_view, 5> kDeviceTypeNames = { "cuda", "hip", "cpu", "xla", "other" };
    constexpr std::array<std::string_view, 4> kScopeKindNames = { "range", "module", "op", "function" };
    constexpr std::array<std::string_view, kPoolKindCount> kPoolKindNames = { "default", "graph", "mem_pool", "other" };
    constexpr std::array<std::string_view, 3> kSeverityNames = { "info", "warning", "error" };
} // namespace

std::string_view toString(EventKind kind) { return nameOf(kEventKindNames, kind); }
std::optional<EventKind> eventKindFromString(std::string_view name) { return lookup<EventKind>(kEventKindNames, name); }
std::string_view toString(Category category) { return nameOf(kCategoryNames, category); }
std::optional<Category> categoryFromString(std::string_view name) { return lookup<Category>(kCategoryNames, name); }
std::string_view toString(DeviceType type) { return nameOf(kDeviceTypeNames, type); }
std::optional<DeviceType> deviceTypeFromString(std::string_view name)
{
    return lookup<DeviceType>(kDeviceTypeNames, name);
}
std::string_view toString(ScopeKind kind) { return nameOf(kScopeKindNames, kind); }
std::optional<ScopeKind> scopeKindFromString(std::string_view name) { return lookup<ScopeKind>(kScopeKindNames, name); }
std::string_view toString(PoolKind kind) { return nameOf(kPoolKindNames, kind); }
std::optional<PoolKind> poolKindFromString(std::string_view name) { return lookup<PoolKind>(kPoolKindNames, name); }
std::string_view toString(Severity severity) { return nameOf(kSeverityNames, severity); }
std::optional<Severity> severityFromString(std::string_view name) { return lookup<Severity>(kSeverityNames, name); }

} // namespace gpumem
