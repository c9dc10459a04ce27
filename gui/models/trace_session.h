#pragma once
// TraceSession loads a trace on a worker thread and hands the immutable result to the UI thread
// (design.md §7). One load at a time; a new open() cancels the previous one. Lives on the UI thread.
#include "analyze/analysis.h"
#include "analyze/trace_summary.h"
#include "core/trace.h"
#include "gui/models/series_lod.h"

#include <QFutureWatcher>
#include <QObject>
#include <QString>

#include <atomic>
#include <memory>
#include <optional>

namespace gpumem::gui {

struct MemoryMapIndex; // gui/models/memory_map_model.h

struct LoadedTrace {
    QString path;
    QString reader; // importer name ("gmt", "jsonl", …)
    Trace trace;
    analyze::TraceSummary summary;
    analyze::Analysis analysis; // the busiest device: timeline, steps, breakdowns at the peaks
    // Levels of detail of the analyzed device's series (points into analysis.timeline), kernels and
    // annotations; the timeline draws through it (computeFrame builds one per frame when it is null).
    std::shared_ptr<const TimelineLod> lod;
    std::shared_ptr<const MemoryMapIndex> memoryMap; // of analysis.device, built on the worker thread
};

// For a trace with memory counters only (analyze::countersOnlyNote): that sentence, capitalised, followed by
// `rest` (", so there is nothing to replay."); empty for any other trace. What each page says instead of
// staying blank.
QString countersOnlyText(const Trace& trace, const QString& rest);

// True for a trace whose memory events carry no timestamps (a snapshot of generation A/B: the
// importer places entry i at i + 1 ns and records "no_timestamps"): its time axes count events.
bool eventIndexAxis(const Trace& trace);

class TraceSession : public QObject {
    Q_OBJECT
public:
    explicit TraceSession(QObject* parent = nullptr);
    ~TraceSession() override;

    // Starts loading `path` in the background; emits progress(), then loaded() or failed(). The
    // analysis (timeline, breakdowns, memory map) is of `device` (an index into Trace::devices()), or of
    // the busiest device when absent or out of range.
    void open(const QString& path, std::optional<DeviceId> device = std::nullopt);
    void cancel();
    // The last trace loaded, or nullptr.
    std::shared_ptr<const LoadedTrace> current() const { return m_current; }

signals:
    void progress(double fraction);
    void loaded(std::shared_ptr<const LoadedTrace> trace);
    // `message` is the one-line error of the importer (names the file and what to do).
    void failed(const QString& path, const QString& message);

private:
    struct Outcome {
        std::shared_ptr<const LoadedTrace> trace;
        QString error;
        bool cancelled = false;
    };
    QFutureWatcher<Outcome>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    std::shared_ptr<const LoadedTrace> m_current;
    QString m_loadingPath;
};

} // namespace gpumem::gui
