#pragma once
// The time axis' ticks as the viewer's time charts (Timeline, Active memory) draw them: at each tick of
// `axis`, a grid line from just above the plot (`plotTop` − 6) down to `bottom`, and its label above
// the plot where it ends left of `maxX`. A painting helper; UI thread.
#include "gui/models/time_axis.h"

#include <QColor>
#include <QPainter>

#include <cmath>

namespace gpumem::gui {

inline void drawTimeTicks(QPainter& p, const TimeAxis& axis, int left, int plotTop, int bottom, int maxX, QColor grid, QColor text)
{
    for (const auto& t : axis.ticks()) {
        const int x = left + int(std::lround(t.x));
        p.setPen(grid);
        p.drawLine(x, plotTop - 6, x, bottom);
        p.setPen(text);
        if (x + 3 + p.fontMetrics().horizontalAdvance(t.label) <= maxX)
            p.drawText(x + 3, plotTop - 8, t.label);
    }
}

} // namespace gpumem::gui
