#pragma once
// The viewer's Diagnosis page: gpumem explain's verdict, findings and proven fixes (analyze::diagnose, the
// one core behind the CLI, docs/explain.md) for the loaded trace, computed on a worker thread (design.md
// §7) and shown as rendered Markdown. A link under the verdict jumps to the memory map at the moment
// explained (instantPicked); each finding's id that names live blocks links to the memory map at that
// moment with those blocks outlined (findingPicked). Lives on the UI thread; owns its widgets.
#include "analyze/diagnosis.h"
#include "gui/models/trace_session.h"

#include <QFutureWatcher>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QTextBrowser;

namespace gpumem::gui {

class DiagnosisPage : public QWidget {
    Q_OBJECT
public:
    explicit DiagnosisPage(QWidget* parent = nullptr);
    // Starts the diagnosis of `trace` (its analysed device, remedies included) in the background; emits
    // ready() when it is shown.
    void setTrace(const std::shared_ptr<const LoadedTrace>& trace);
    // The diagnosis shown, or nullopt while none is (diagnosing, or nothing to diagnose).
    const std::optional<analyze::Diagnosis>& diagnosis() const { return m_diagnosis; }
    QTextBrowser* browser() const { return m_browser; }
    // What a click on the moment link does (also for tests): emits instantPicked with the moment's time.
    void showMoment();
    // What a click on finding `finding`'s id does (also for tests): emits findingPicked with the moment's
    // time and namedAllocations() of the finding; nothing for a finding that names no live block.
    void showFinding(std::size_t finding);
    // The trace allocations (trace.allocations() indexes) of the live blocks a finding names: its blocks,
    // then those pinning its segments, each once, in that order.
    static std::vector<std::uint32_t> namedAllocations(const analyze::Finding& finding);

signals:
    // The diagnosis is shown; `oom` when its moment is an OOM (the window then opens this page first).
    void ready(bool oom);
    // The moment explained (absolute ns), for the memory map.
    void instantPicked(gpumem::TimeNs time);
    // A finding clicked: the moment (absolute ns) and the allocations it names, for
    // MemoryMapPage::highlightAllocations.
    void findingPicked(gpumem::TimeNs time, std::vector<std::uint32_t> allocations);

private:
    struct Outcome {
        std::optional<analyze::Diagnosis> diagnosis;
        QString error;
    };
    QTextBrowser* m_browser = nullptr;
    QFutureWatcher<Outcome>* m_watcher = nullptr;
    std::shared_ptr<const LoadedTrace> m_trace;
    std::optional<analyze::Diagnosis> m_diagnosis;
};

} // namespace gpumem::gui
