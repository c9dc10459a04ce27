#pragma once
// Human-readable units and their parsing, shared by every front end.
#include "core/types.h"

#include <string>
#include <string_view>

namespace gpumem {

// "0 B", "512 B", "1.50 KiB", "12.00 MiB", "3.25 GiB" (binary prefixes, two decimals).
std::string formatBytes(Bytes bytes);
// Seconds with microsecond precision: "1.234567 s".
std::string formatSeconds(TimeNs duration);
// An offset from a start, signed: "+1.234567 s", "-0.019424 s" (an event before the start).
std::string formatOffset(TimeNs offset);
// Parses "80GiB", "80 GB", "512MiB", "2MB", "1024", "1.5GiB" (GB = 10^9, GiB = 2^30). Throws UsageError
// naming `what` and the accepted forms on anything else.
Bytes parseBytes(std::string_view text, std::string_view what = "size");

} // namespace gpumem
