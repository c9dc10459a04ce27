#include "gui/models/time_axis.h"

#include <algorithm>
#include <cmath>

namespace gpumem::gui {

TimeAxis::TimeAxis(TimeRange full, int width)
    : m_width(std::max(width, 1))
{
    setFull(full);
}

void TimeAxis::setWidth(int pixels) { m_width = std::max(pixels, 1); }

void TimeAxis::setFull(TimeRange full)
{
    if (full.end - full.start < kMinSpanNs)
        full.end = full.start + kMinSpanNs;
    m_full = full;
    m_visible = full;
}

void TimeAxis::setVisible(TimeRange r)
{
    if (r.end < r.start)
        std::swap(r.start, r.end);
    TimeNs span = std::clamp<TimeNs>(r.length(), kMinSpanNs, m_full.length());
    TimeNs start = std::clamp<TimeNs>(r.start, m_full.start, m_full.end - span);
    m_visible = { start, start + span };
}

double TimeAxis::nsPerPixel() const { return double(m_visible.length()) / double(m_width); }

double TimeAxis::toX(TimeNs time) const { return double(time - m_visible.start) / nsPerPixel(); }

TimeNs TimeAxis::toTime(double x) const { return m_visible.start + static_cast<TimeNs>(std::llround(x * nsPerPixel())); }

void TimeAxis::zoom(double factor, double anchorX)
{
    if (!(factor > 0) || !std::isfinite(factor))
        return;
    TimeNs anchor = toTime(anchorX);
    double span = double(m_visible.length()) / factor;
    double leftFraction = anchorX / double(m_width);
    auto start = static_cast<TimeNs>(std::llround(double(anchor) - leftFraction * span));
    setVisible({ start, start + static_cast<TimeNs>(std::llround(span)) });
}

void TimeAxis::pan(double dx)
{
    auto shift = static_cast<TimeNs>(std::llround(dx * nsPerPixel()));
    setVisible({ m_visible.start + shift, m_visible.end + shift });
}

TimeRange TimeAxis::rangeBetween(double x0, double x1) const
{
    if (x1 < x0)
        std::swap(x0, x1);
    return { toTime(x0), toTime(x1) };
}

std::vector<Tick> TimeAxis::ticks(double minSpacingPx) const
{
    std::vector<Tick> out;
    double minStep = std::max(minSpacingPx, 1.0) * nsPerPixel();
    double magnitude = std::pow(10.0, std::floor(std::log10(std::max(minStep, 1.0))));
    double step = magnitude;
    for (double m : { 1.0, 2.0, 5.0, 10.0 }) {
        if (m * magnitude >= minStep) {
            step = m * magnitude;
            break;
        }
    }
    auto stepNs = std::max<TimeNs>(1, static_cast<TimeNs>(step));
    // Ticks are placed at multiples of the step counted from the trace start, so labels read 0, 5 ms, 10 ms…
    // (from entry 0, at 1 ns, on an event-index axis: event 0, 100, 200…).
    const TimeNs origin = m_eventIndex ? 1 : m_full.start;
    TimeNs rel = m_visible.start - origin;
    TimeNs first = rel <= 0 ? 0 : (rel + stepNs - 1) / stepNs * stepNs;
    for (TimeNs t = first; origin + t <= m_visible.end && out.size() < 1000; t += stepNs)
        out.push_back(Tick { origin + t, toX(origin + t), label(origin + t) });
    return out;
}

QString TimeAxis::label(TimeNs time) const
{
    if (m_eventIndex)
        return QString("event %1").arg(time - 1);
    return formatDuration(time - m_full.start);
}

QString formatDuration(TimeNs ns)
{
    if (ns == 0)
        return "0 s";
    double v = std::abs(double(ns));
    const char* unit = "ns";
    double scale = 1;
    if (v >= 1e9)
        unit = "s", scale = 1e9;
    else if (v >= 1e6)
        unit = "ms", scale = 1e6;
    else if (v >= 1e3)
        unit = "µs", scale = 1e3;
    return QString::number(double(ns) / scale, 'g', 3) + " " + QString::fromUtf8(unit);
}

void ZoomHistory::push(const TimeRange& range)
{
    if (!m_entries.empty() && m_entries[m_index] == range)
        return;
    if (!m_entries.empty())
        m_entries.resize(m_index + 1);
    m_entries.push_back(range);
    m_index = m_entries.size() - 1;
}

TimeRange ZoomHistory::back()
{
    if (canBack())
        --m_index;
    return m_entries.empty() ? TimeRange {} : m_entries[m_index];
}

TimeRange ZoomHistory::forward()
{
    if (canForward())
        ++m_index;
    return m_entries.empty() ? TimeRange {} : m_entries[m_index];
}

void ZoomHistory::clear()
{
    m_entries.clear();
    m_index = 0;
}

} // namespace gpumem::gui
