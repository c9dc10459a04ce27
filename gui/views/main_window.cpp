#include "gui/views/main_window.h"

#include "analyze/trace_summary.h"

#include "analyze/summary_report.h"
#include "gui/views/active_memory_page.h"
#include "gui/views/active_memory_view.h"
#include "gui/views/breakdown_page.h"
#include "gui/views/chart_export.h"
#include "gui/views/diagnosis_page.h"
#include "gui/views/memory_map_page.h"
#include "gui/views/memory_map_view.h"
#include "gui/views/timeline_view.h"
#include "gui/views/treemap_view.h"
#include "gui/views/what_if_page.h"

#include <QAction>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

#include <sstream>

namespace gpumem::gui {

namespace {
    constexpr int kRecentMax = 8;
}

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent)
{
    setWindowTitle("gpumem");
    setAcceptDrops(true);
    resize(1000, 700);
    m_summary = new QPlainTextEdit(this);
    m_summary->setReadOnly(true);
    m_summary->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_summary->setPlaceholderText("Open a trace: File → Open, drop a file here, or pass it on the command line.\n"
                                  "gpumem reads .gmt, .jsonl, PyTorch snapshots and profiler traces, and more.");
    m_timeline = new TimelineView(this);
    m_timeline->setFillHeight(true); // lanes share the window height below the kernel and annotation rows
    m_tabs = new QTabWidget(this);
    // Pictures first: the viewer opens on the Timeline (the Diagnosis page where the trace has an
    // OOM), the text summary is the last tab (issue #18 item 6).
    m_tabs->addTab(m_timeline, "Timeline");
    m_activeMemory = new ActiveMemoryPage(this);
    m_tabs->addTab(m_activeMemory, "Active memory");
    m_memoryMap = new MemoryMapPage(this);
    m_tabs->addTab(m_memoryMap, "Memory map");
    m_breakdown = new BreakdownPage(this);
    m_tabs->addTab(m_breakdown, "Peak breakdown");
    // The picked instant: the Timeline's (or a click on the map) drives the other pages.
    connect(m_timeline, &TimelineView::instantPicked, m_memoryMap, &MemoryMapPage::setInstant);
    connect(m_timeline, &TimelineView::instantPicked, m_breakdown, &BreakdownPage::setPickedInstant);
    connect(m_timeline, &TimelineView::visibleRangeChanged, m_memoryMap, &MemoryMapPage::setTimeRange);
    connect(m_memoryMap, &MemoryMapPage::instantPicked, m_breakdown, &BreakdownPage::setPickedInstant);
    connect(m_memoryMap, &MemoryMapPage::instantPicked, this, [this](TimeNs t) { m_timeline->setSelectedInstant(t); });
    // The active-memory timeline and the Timeline page show the same range; a band's block opens on the map.
    connect(m_timeline, &TimelineView::visibleRangeChanged, m_activeMemory->view(), &ActiveMemoryView::setVisibleRange);
    connect(m_activeMemory->view(), &ActiveMemoryView::visibleRangeChanged, this, [this](TimeRange r) {
        if (r == m_timeline->axis().visible())
            return;
        m_timeline->axis().setVisible(r);
        m_timeline->refresh();
    });
    connect(m_activeMemory, &ActiveMemoryPage::blockPicked, this, [this](std::size_t block, TimeNs t) {
        m_memoryMap->setInstant(t);
        m_memoryMap->selectBlock(block);
        m_timeline->setSelectedInstant(t);
        m_breakdown->setPickedInstant(t);
        m_tabs->setCurrentWidget(m_memoryMap);
    });
    m_whatIf = new WhatIfPage(this);
    m_tabs->addTab(m_whatIf, "What-if");
    m_tabs->addTab(m_summary, "Summary");
    // Diagnosis (gpumem explain): opened first when the trace has an OOM; its moment link opens the memory map.
    auto* diagnosis = new DiagnosisPage(this);
    diagnosis->setObjectName("diagnosisPage");
    m_tabs->insertTab(0, diagnosis, "Diagnosis");
    m_tabs->setCurrentWidget(m_timeline);
    connect(diagnosis, &DiagnosisPage::ready, this, [this, diagnosis](bool oom) {
        if (oom && !m_pageChosen) // a page asked for (showPage, --screenshot) stays
            m_tabs->setCurrentWidget(diagnosis);
    });
    connect(diagnosis, &DiagnosisPage::instantPicked, this, [this](TimeNs t) {
        m_memoryMap->setInstant(t);
        m_timeline->setSelectedInstant(t);
        m_tabs->setCurrentWidget(m_memoryMap);
    });
    // A finding's id: the same moment with the blocks it names outlined, the first selected.
    connect(diagnosis, &DiagnosisPage::findingPicked, this, [this](TimeNs t, const std::vector<std::uint32_t>& allocations) {
        m_memoryMap->highlightAllocations(t, allocations);
        m_timeline->setSelectedInstant(t);
        m_tabs->setCurrentWidget(m_memoryMap);
    });
    m_timeline->setWindowTitle("timeline");
    addChartExportActions(*m_timeline, "timeline.png");
    m_memoryMap->view()->setWindowTitle("memory-map");
    addChartExportActions(*m_memoryMap->view(), "memory-map.png");
    addChartExportActions(*m_activeMemory->view(), "active-memory.png");
    m_breakdown->treemap()->setWindowTitle("breakdown");
    addChartExportActions(*m_breakdown->treemap(), "breakdown.png");
    // The what-if curves overlay the Timeline page's memory lane as well as the page's own chart.
    connect(m_whatIf, &WhatIfPage::curvesChanged, this,
        [this](std::vector<SimulatedCurve> curves) { m_timelineModel.setContent({ std::move(curves), false }); });
    connect(&m_timelineModel, &TimelineModel::contentChanged, m_timeline, &TimelineView::refresh);
    setCentralWidget(m_tabs);
    connect(m_timeline, &TimelineView::frameRequested, &m_timelineModel, &TimelineModel::request);
    connect(&m_timelineModel, &TimelineModel::frameReady, m_timeline, &TimelineView::setFrame);

    auto* file = menuBar()->addMenu("&File");
    auto* open = file->addAction("&Open…", this, [this] {
        QString path = QFileDialog::getOpenFileName(this, "Open trace");
        if (!path.isEmpty())
            openTrace(path);
    });
    open->setShortcut(QKeySequence::Open);
    m_recent = file->addMenu("Open &Recent");
    file->addSeparator();
    file->addAction("&Export Chart…", this, [this] {
        // The current page's chart: the timeline lanes, the memory map, the breakdown's treemap, the
        // what-if curves; the page itself for a page added later; the summary is text.
        QWidget* page = m_tabs->currentWidget();
        QWidget* chart = page == m_whatIf ? static_cast<QWidget*>(m_whatIf->chart())
            : page == m_memoryMap         ? static_cast<QWidget*>(m_memoryMap->view())
            : page == m_breakdown         ? static_cast<QWidget*>(m_breakdown->treemap())
            : page == m_activeMemory      ? static_cast<QWidget*>(m_activeMemory->view())
            : page == m_summary           ? nullptr
                                          : page;
        if (chart)
            exportChartInteractively(*chart, this, (chart->windowTitle().isEmpty() ? QString("chart") : chart->windowTitle()) + ".png");
        else
            statusBar()->showMessage("This page has no chart to export", 5000);
    });
    file->addAction("Export What-if &Table as CSV…", this, [this] { m_whatIf->exportCsvInteractively(); });
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
    rebuildRecentMenu();
    // The pages show one device; a multi-GPU trace picks another here (it is analysed again).
    m_devices = menuBar()->addMenu("&Device");
    m_devices->setEnabled(false);

    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setMaximumWidth(240);
    m_progress->hide();
    m_cancel = new QPushButton("Cancel", this);
    m_cancel->hide();
    statusBar()->addPermanentWidget(m_progress);
    statusBar()->addPermanentWidget(m_cancel);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        m_session.cancel();
        m_progress->hide();
        m_cancel->hide();
        statusBar()->showMessage("Loading cancelled", 5000);
    });
    connect(&m_session, &TraceSession::progress, this, [this](double f) { m_progress->setValue(int(f * 1000)); });
    connect(&m_session, &TraceSession::loaded, this, &MainWindow::showLoaded);
    connect(&m_session, &TraceSession::failed, this, &MainWindow::showFailed);
}

void MainWindow::openTrace(const QString& path, std::optional<DeviceId> device)
{
    statusBar()->showMessage("Loading " + path + "…");
    m_progress->setValue(0);
    m_progress->show();
    m_cancel->show();
    m_session.open(path, device);
}

void MainWindow::rebuildDeviceMenu(const LoadedTrace& t)
{
    m_devices->clear();
    const auto& devices = t.trace.devices();
    std::vector<bool> hasEvents(devices.size(), false);
    for (DeviceId d : t.trace.memory().device)
        if (d < hasEvents.size())
            hasEvents[d] = true;
    if (t.trace.memory().count() == 0) // memory counters only: the devices with counters
        for (const auto& s : t.trace.counterSeries())
            if (s.device < hasEvents.size())
                hasEvents[s.device] = true;
    int shown = 0;
    for (DeviceId d = 0; d < devices.size(); ++d) {
        if (!hasEvents[d])
            continue;
        QAction* a = m_devices->addAction(QString::fromStdString(analyze::deviceLabel(devices[d])));
        a->setCheckable(true);
        a->setChecked((!t.analysis.empty || t.trace.memory().count() == 0) && d == t.analysis.device);
        const QString path = t.path;
        connect(a, &QAction::triggered, this, [this, path, d] { openTrace(path, d); });
        ++shown;
    }
    m_devices->setEnabled(shown > 1);
    m_devices->setTitle(shown > 1 ? QString("&Device (%1)").arg(shown) : QString("&Device"));
}

QString MainWindow::summaryText() const { return m_summary->toPlainText(); }
QWidget* MainWindow::currentPage() const { return m_tabs->currentWidget(); }

bool MainWindow::showPage(const QString& name)
{
    m_pageChosen = true;
    if (name == "diagnosis") {
        if (auto* diagnosis = findChild<DiagnosisPage*>("diagnosisPage"))
            m_tabs->setCurrentWidget(diagnosis);
    } else if (name == "summary")
        m_tabs->setCurrentWidget(m_summary);
    else if (name == "timeline")
        m_tabs->setCurrentWidget(m_timeline);
    else if (name == "active-memory")
        m_tabs->setCurrentWidget(m_activeMemory);
    else if (name == "memory-map")
        m_tabs->setCurrentWidget(m_memoryMap);
    else if (name == "breakdown")
        m_tabs->setCurrentWidget(m_breakdown);
    else if (name == "code-tree") { // the Peak breakdown page's code tree, flame graph and per-line view
        m_breakdown->setCallStackTree(true);
        m_tabs->setCurrentWidget(m_breakdown);
    }
    else if (name == "what-if")
        m_tabs->setCurrentWidget(m_whatIf);
    else {
        m_pageChosen = false;
        return false;
    }
    return true;
}

void MainWindow::showLoaded(const std::shared_ptr<const LoadedTrace>& t)
{
    m_progress->hide();
    m_cancel->hide();
    std::ostringstream text;
    analyze::writeSummaryText(t->summary, t->path.toStdString(), t->reader.toStdString(), text);
    m_lastError.clear();
    const QString countersOnly = countersOnlyText(t->trace,
        ". The Timeline page draws the recorded counters; the Memory map, Peak breakdown and What-if pages need "
        "memory events with addresses.\n\n");
    m_summary->setPlainText(countersOnly + QString::fromStdString(text.str()));
    m_timelineModel.setTrace(t);
    m_timelineModel.setContent({});
    m_timeline->axis().setEventIndex(eventIndexAxis(t->trace));
    m_timeline->setFullRange(fullRangeOf(*t));
    if (!m_pageChosen) // not a text page; the Diagnosis page takes over when it finds an OOM
        m_tabs->setCurrentWidget(m_timeline);
    m_activeMemory->setTrace(t);
    m_whatIf->setTrace(t);
    m_memoryMap->setTrace(t);
    m_breakdown->setTrace(t);
    if (auto* diagnosis = findChild<DiagnosisPage*>("diagnosisPage"))
        diagnosis->setTrace(t);
    rebuildDeviceMenu(*t);
    setWindowTitle(QFileInfo(t->path).fileName() + " — gpumem");
    int serious = 0;
    for (const auto& a : t->summary.anomalies)
        serious += a.severity != Severity::Info;
    if (serious)
        statusBar()->showMessage(QString("Loaded %1 (%2 memory events) with %3 import warnings or errors: see the Summary page")
                                     .arg(t->path).arg(t->summary.memoryEvents).arg(serious));
    else if (!countersOnly.isEmpty())
        statusBar()->showMessage(QString("Loaded %1 (memory counters only: %2 counter samples, no memory events)")
                                     .arg(t->path)
                                     .arg(t->summary.counterSamples),
            5000);
    else
        statusBar()->showMessage(QString("Loaded %1 (%2 memory events)").arg(t->path).arg(t->summary.memoryEvents), 5000);
    QSettings settings("gpumem", "gpumem-gui");
    QStringList recent = settings.value("recentFiles").toStringList();
    recent.removeAll(t->path);
    recent.prepend(t->path);
    while (recent.size() > kRecentMax)
        recent.removeLast();
    settings.setValue("recentFiles", recent);
    rebuildRecentMenu();
    emit loadFinished(true);
}

void MainWindow::showFailed(const QString& path, const QString& message)
{
    m_progress->hide();
    m_cancel->hide();
    statusBar()->showMessage("Could not open " + path, 10000);
    m_lastError = message;
    if (!m_quietErrors)
        QMessageBox::warning(this, "Cannot open trace", message);
    emit loadFinished(false);
}

void MainWindow::rebuildRecentMenu()
{
    m_recent->clear();
    QSettings settings("gpumem", "gpumem-gui");
    const QStringList recent = settings.value("recentFiles").toStringList();
    for (const QString& path : recent)
        m_recent->addAction(path, this, [this, path] { openTrace(path); });
    m_recent->setEnabled(!recent.isEmpty());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile())
        openTrace(urls.first().toLocalFile());
}

} // namespace gpumem::gui
