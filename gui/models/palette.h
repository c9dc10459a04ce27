#pragma once
// The viewer's qualitative colours (Tableau 10, readable by most colour-blind people), shared by
// the memory map and the treemap. Pure functions; thread-safe.
#include <QColor>

#include <cstddef>

namespace gpumem::gui {

inline constexpr std::size_t kPaletteSize = 10;

// Colour `i` of the palette (wraps around).
inline QColor paletteColour(std::size_t i)
{
    static const QRgb colours[kPaletteSize] = {
        qRgb(78, 121, 167), qRgb(242, 142, 43), qRgb(225, 87, 89), qRgb(118, 183, 178), qRgb(89, 161, 79),
        qRgb(237, 201, 72), qRgb(176, 122, 161), qRgb(255, 157, 167), qRgb(156, 117, 95), qRgb(186, 176, 172),
    };
    return QColor(colours[i % kPaletteSize]);
}

} // namespace gpumem::gui
