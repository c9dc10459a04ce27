#include "core/byte_total.h"

#include "core/units.h"

namespace gpumem {

std::string formatByteTotalShort(Bytes total) { return isSaturated(total) ? "≥ 16 EiB" : formatBytes(total); }

std::string formatByteTotal(Bytes total)
{
    return isSaturated(total) ? formatByteTotalShort(total) + " (saturated: the trace's byte total is at least 2^64 - 1 B)"
                              : formatBytes(total);
}

std::string formatByteChange(Bytes before, Bytes after)
{
    // A saturated side is a lower bound, so the change is bounded on one side only.
    if (isSaturated(before) && isSaturated(after))
        return "unknown: both totals saturated";
    if (isSaturated(after))
        return "≥ +" + formatBytes(after - before);
    if (isSaturated(before))
        return "≤ -" + formatBytes(before - after);
    return after >= before ? "+" + formatBytes(after - before) : "-" + formatBytes(before - after);
}

} // namespace gpumem
