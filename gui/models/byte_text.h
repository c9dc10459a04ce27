#pragma once
// Byte sizes as the viewer shows them: core's formatBytes (core/units.h: "512 B", "1.50 KiB", "3.25 GiB"),
// the one formatter the CLI's reports use too, so that a figure reads the same in both front ends.
// Pure function; thread-safe.
#include "core/types.h"
#include "core/units.h"

#include <QString>

namespace gpumem::gui {

inline QString bytesText(Bytes bytes) { return QString::fromStdString(formatBytes(bytes)); }

} // namespace gpumem::gui
