#pragma once
// The main window: opens traces (command line, File → Open, recent files, drag and drop) through a
// TraceSession and shows the summary of the loaded trace. Owns its widgets (Qt parent ownership).
#include "gui/models/timeline_model.h"
#include "gui/models/trace_session.h"

#include <QMainWindow>

#include <optional>

class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QMenu;
class QTabWidget;

namespace gpumem::gui {

class TimelineView;
class WhatIfPage;
class MemoryMapPage;
class BreakdownPage;
class ActiveMemoryPage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    // Loads `path`; the pages show `device` (an index into Trace::devices()), else the busiest device.
    void openTrace(const QString& path, std::optional<DeviceId> device = std::nullopt);
    // The Device menu (one checkable entry per device with memory events; enabled with two or more).
    QMenu* deviceMenu() const { return m_devices; }
    TraceSession& session() { return m_session; }
    // The summary text currently shown (for tests).
    QString summaryText() const;
    TimelineView* timelineView() const { return m_timeline; }
    WhatIfPage* whatIfPage() const { return m_whatIf; }
    MemoryMapPage* memoryMapPage() const { return m_memoryMap; }
    BreakdownPage* breakdownPage() const { return m_breakdown; }
    ActiveMemoryPage* activeMemoryPage() const { return m_activeMemory; }
    // The page shown now (tests: the viewer opens on the Timeline, or the Diagnosis page on an OOM).
    QWidget* currentPage() const;
    // Shows a page by name: "diagnosis", "timeline", "active-memory", "memory-map", "breakdown",
    // "code-tree" (the breakdown by call stack), "what-if" or "summary". Returns
    // false for an unknown name.
    bool showPage(const QString& name);
    // The last load error (the importer's one-line message), empty after a successful load.
    QString statusMessage() const { return m_lastError; }

signals:
    // Emitted after a load finished, successfully or not (tests wait on it).
    void loadFinished(bool ok);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void showLoaded(const std::shared_ptr<const LoadedTrace>& trace);
    void showFailed(const QString& path, const QString& message);
    void rebuildRecentMenu();
    void rebuildDeviceMenu(const LoadedTrace& t);

    TraceSession m_session;
    TimelineModel m_timelineModel;
    QTabWidget* m_tabs = nullptr;
    QPlainTextEdit* m_summary = nullptr;
    TimelineView* m_timeline = nullptr;
    WhatIfPage* m_whatIf = nullptr;
    MemoryMapPage* m_memoryMap = nullptr;
    BreakdownPage* m_breakdown = nullptr;
    ActiveMemoryPage* m_activeMemory = nullptr;
    QProgressBar* m_progress = nullptr;
    QPushButton* m_cancel = nullptr;
    QMenu* m_recent = nullptr;
    QMenu* m_devices = nullptr;
    bool m_quietErrors = false;
    bool m_pageChosen = false; // showPage() was called: an OOM does not switch to the Diagnosis page
    QString m_lastError;

public:
    // Tests: report load errors in the status bar instead of a modal dialog.
    void setQuietErrors(bool quiet) { m_quietErrors = quiet; }
};

} // namespace gpumem::gui
