#pragma once
// What the timeline view draws for one visible range and width: per-pixel buckets computed off the
// UI thread (design.md §7: draw per pixel, min/max per bucket, so millions of events stay smooth).
// A plain value; the view only renders it.
#include "gui/models/time_axis.h"

#include <QColor>
#include <QString>

#include <optional>
#include <vector>

namespace gpumem::gui {

// One pixel column of a series: the min and max over the bucket and the value at its end.
struct PixelBucket {
    double min = 0;
    double max = 0;
    double last = 0;
    bool valid = false; // false where the series has no value yet (before its first sample)
};

struct PixelSeries {
    QString name;     // "allocated", "reserved (recorded)", "reserved (pytorch:expandable_segments:True)"
    QColor color;
    bool filled = false; // draw as a filled area instead of a line band
    std::vector<PixelBucket> buckets; // one per pixel column
    bool dashed = false; // a simulated curve: dashed, so a recorded curve it coincides with stays visible
};

// A lane of value series sharing one vertical scale (bytes, or a 0–1 fraction).
struct ValueLane {
    QString title;
    bool fraction = false; // values are 0–1 (fragmentation); otherwise bytes
    double maxValue = 0;   // the vertical scale's top (over the visible range)
    std::vector<PixelSeries> series;
    QString note; // drawn under the legend: why the lane shows what it shows (a trace with counters only)
    double relativeHeight = 1.0; // of the memory lane's height (the fragmentation lane: half)
    // A horizontal line at this value (the what-if device capacity), with its label.
    std::optional<double> capacity;
    QString capacityLabel;
    // Vertical marks: each out-of-memory event in the range, recorded or simulated.
    struct Mark {
        double x = 0; // pixels
        QColor color;
        QString label; // "OOM (recorded)", "OOM (pytorch)"
    };
    std::vector<Mark> marks {};
};

// Named intervals (kernels per stream, annotations, steps) drawn as boxes; pixel-sized boxes merge.
struct IntervalRow {
    QString title;
    struct Box {
        double x0 = 0, x1 = 0; // pixels, x1 >= x0
        QString label;         // drawn when the box is wide enough
        QColor color;
    };
    std::vector<Box> boxes;
};

struct TimelineFrame {
    TimeRange range;
    int width = 0;
    std::vector<ValueLane> lanes;
    std::vector<IntervalRow> rows;
};

} // namespace gpumem::gui
