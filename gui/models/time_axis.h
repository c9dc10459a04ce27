#pragma once
// The maths of a horizontal time axis: the visible time range mapped onto a pixel width, zoom about
// an anchor, pan by pixels, clamping to the trace's full range, "nice" tick marks (1-2-5 steps) and
// their labels, and a zoom history with back/forward. Pure value types, no widgets; unit-tested.
#include "core/types.h"

#include <QString>

#include <vector>

namespace gpumem::gui {

struct TimeRange {
    TimeNs start = 0;
    TimeNs end = 0; // exclusive; end > start for a non-empty range
    TimeNs length() const { return end - start; }
    bool operator==(const TimeRange&) const = default;
};

struct Tick {
    TimeNs time = 0;
    double x = 0;
    QString label; // relative to the trace start, e.g. "12.5 ms"
};

class TimeAxis {
public:
    // `full`: the whole trace; the visible range starts as all of it. Widths below 1 pixel act as 1.
    explicit TimeAxis(TimeRange full = { 0, 1 }, int width = 1);

    const TimeRange& full() const { return m_full; }
    const TimeRange& visible() const { return m_visible; }
    int width() const { return m_width; }
    void setWidth(int pixels);
    void setFull(TimeRange full); // also resets the visible range to it
    // Sets the visible range, clamped into the full range; never narrower than kMinSpanNs.
    void setVisible(TimeRange range);

    double toX(TimeNs time) const;
    TimeNs toTime(double x) const;
    // Nanoseconds per pixel (≥ 1/width of the minimum span).
    double nsPerPixel() const;

    // Zooms by `factor` (>1 zooms in) keeping the time under pixel `anchorX` fixed.
    void zoom(double factor, double anchorX);
    // Moves the view by `dx` pixels (positive: later times come into view), clamped to the full range.
    void pan(double dx);
    // The range between two pixel positions (rubber-band zoom), in either order.
    TimeRange rangeBetween(double x0, double x1) const;

    // Ticks at a 1-2-5 step chosen so that labels are at least `minSpacingPx` apart.
    std::vector<Tick> ticks(double minSpacingPx = 80) const;

    // An event-index axis: a snapshot without timestamps places entry i at i + 1 ns (the importer's
    // "no_timestamps" anomaly, importers/snapshot_importer.h), so its axis counts entries instead
    // of showing an invented duration. Labels read "event 1200".
    void setEventIndex(bool eventIndex) { m_eventIndex = eventIndex; }
    bool eventIndex() const { return m_eventIndex; }
    // The label of a time on this axis: the duration since the full range's start ("12.5 ms"), or
    // "event N" on an event-index axis.
    QString label(TimeNs time) const;

    static constexpr TimeNs kMinSpanNs = 1000; // 1 µs: below this nothing in a trace is resolvable

private:
    TimeRange m_full;
    TimeRange m_visible;
    int m_width;
    bool m_eventIndex = false;
};

// "0 s", "250 µs", "12.5 ms", "3.2 s": a duration with three significant digits at most.
QString formatDuration(TimeNs ns);

// Back/forward history of visible ranges, like a browser's.
class ZoomHistory {
public:
    void push(const TimeRange& range); // drops the forward entries
    bool canBack() const { return m_index > 0; }
    bool canForward() const { return m_index + 1 < m_entries.size(); }
    TimeRange back();
    TimeRange forward();
    void clear();

private:
    std::vector<TimeRange> m_entries;
    std::size_t m_index = 0;
};

} // namespace gpumem::gui
