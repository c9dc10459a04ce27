#pragma once
// The what-if engine of the viewer (issue #7 item 5): replays a loaded trace through several allocator
// policies in the background, one QtConcurrent task per policy, and hands each ReplayResult to the UI
// thread as it finishes, with its reserved curve as a DeviceTimeline for the timeline overlay. The
// same Replayer as `gpumem replay` (design.md §7: the GUI computes nothing the CLI could not print).
// Lives on the UI thread; results are owned by the engine and read there. Workers share only the
// immutable LoadedTrace and a cancel flag, so cancelling or destroying the engine never blocks.
#include "gui/models/timeline_model.h"
#include "replay/replayer.h"

#include <QColor>
#include <QObject>
#include <QStringList>

#include <atomic>
#include <memory>
#include <vector>

namespace gpumem::gui {

// Turns what a user typed into policy specs. `text` holds one or more entries separated by ';' or
// line breaks; each is a policy spec (NAME[@VERSION][:OPTIONS], NAME one of registeredPolicies()) or,
// when its first word is not a policy name, a raw PYTORCH_CUDA_ALLOC_CONF string, which becomes
// "pytorch:<entry>" (so "expandable_segments:True,max_split_size_mb:128" works as pasted). Blank
// entries are skipped. Syntax only: WhatIfEngine::start validates the specs.
QStringList policySpecsFromText(const QString& text);

// The colour of the n-th simulated curve (distinct from the recorded series' blue, green and red).
QColor simulatedCurveColor(int index);

struct WhatIfResult {
    QString spec; // as requested
    int order = 0; // its position in the request (the colour index)
    QColor color;
    replay::ReplayResult result; // its timeline moved into `curve`
    std::shared_ptr<const analyze::DeviceTimeline> curve; // time, reserved, allocated after each change
    std::shared_ptr<const SeriesLod> reservedLod; // into curve->reserved
};

class WhatIfEngine : public QObject {
    Q_OBJECT
public:
    explicit WhatIfEngine(QObject* parent = nullptr);
    ~WhatIfEngine() override;

    // Cancels any running batch, validates every spec (throws UsageError naming the bad one; nothing
    // starts then) and starts one background replay per spec on the analyzed device of `trace`, with
    // `capacity` bytes (0 = unlimited) and OnOom::Skip like `gpumem replay`. Results arrive through
    // resultReady() in the order they finish; finished() follows the last.
    void start(std::shared_ptr<const LoadedTrace> trace, const QStringList& specs, Bytes capacity);
    // Drops the running batch: its replays stop at their next cancellation check and their results
    // are discarded; emits finished() at once when a batch was running.
    void cancel();
    bool isRunning() const { return m_pending > 0; }
    int requested() const { return m_requested; }
    // The capacity of the current batch (0 = unlimited).
    Bytes capacity() const { return m_capacity; }
    const std::vector<WhatIfResult>& results() const { return m_results; }
    // The curves of the results so far, in request order (for TimelineModel::setContent).
    std::vector<SimulatedCurve> curves() const;

signals:
    void resultReady(int index); // index into results()
    void failed(const QString& spec, const QString& message);
    void finished();

private:
    std::vector<WhatIfResult> m_results;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    std::uint64_t m_generation = 0;
    int m_pending = 0;
    int m_requested = 0;
    Bytes m_capacity = 0;
};

} // namespace gpumem::gui
