#include "gui/views/what_if_page.h"

#include "core/error.h"
#include "core/units.h"
#include "gui/views/chart_export.h"
#include "gui/views/timeline_view.h"
#include "analyze/replay_report.h"
#include "replay/policy_registry.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <fstream>

namespace gpumem::gui {

WhatIfPage::WhatIfPage(QWidget* parent)
    : QWidget(parent)
{
    auto* controls = new QWidget(this);
    auto* form = new QVBoxLayout(controls);
    form->setContentsMargins(0, 0, 0, 0);
    form->addWidget(new QLabel("<b>Policies</b>", controls));
    m_policies = new QListWidget(controls);
    for (const auto& p : replay::registeredPolicies()) {
        auto* item = new QListWidgetItem(QString::fromStdString(p.name), m_policies);
        item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
        item->setCheckState(Qt::Unchecked);
        QString tip = QString::fromStdString(p.summary);
        if (!p.options.empty()) {
            QStringList options;
            for (const auto& o : p.options)
                options << QString::fromStdString(o);
            tip += "\noptions: " + options.join(", ");
        }
        item->setToolTip(tip);
    }
    form->addWidget(m_policies, 1);
    auto* specLabel = new QLabel("More specs or PYTORCH_CUDA_ALLOC_CONF strings (separate with ;)", controls);
    specLabel->setWordWrap(true);
    form->addWidget(specLabel);
    m_specText = new QLineEdit(controls);
    m_specText->setPlaceholderText("expandable_segments:True,max_split_size_mb:128");
    m_specText->setToolTip("A policy spec (NAME[@VERSION][:OPTIONS], e.g. pytorch@2.0:roundup_power2_divisions:4)\n"
                           "or what you put in PYTORCH_CUDA_ALLOC_CONF, which runs as pytorch:<that>.");
    form->addWidget(m_specText);
    form->addWidget(new QLabel("Device capacity (empty = unlimited)", controls));
    m_capacity = new QLineEdit(controls);
    m_capacity->setPlaceholderText("unlimited, or e.g. 40GiB, 24 GB, 2PiB"); // parseBytes forms (tests/gui/what_if_test.cpp)
    form->addWidget(m_capacity);
    auto* buttons = new QHBoxLayout;
    m_run = new QPushButton("Run replays", controls);
    m_cancel = new QPushButton("Cancel", controls);
    m_cancel->setEnabled(false);
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    form->addLayout(buttons);
    m_status = new QLabel("Open a trace, choose policies and run.", controls);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addWidget(m_status);
    controls->setFixedWidth(290);

    m_chart = new TimelineView(this);
    m_chart->setMinimumHeight(TimelineView::kAxisHeight + TimelineView::kLaneHeight + 8);
    m_chart->setWindowTitle("what-if reserved curves");
    m_chart->setFillHeight(true);
    addChartExportActions(*m_chart, "what-if.png");
    m_timelineModel.setContent({ {}, true });
    connect(m_chart, &TimelineView::frameRequested, &m_timelineModel, &TimelineModel::request);
    connect(&m_timelineModel, &TimelineModel::frameReady, m_chart, &TimelineView::setFrame);
    connect(&m_timelineModel, &TimelineModel::contentChanged, m_chart, &TimelineView::refresh);

    auto* tableBox = new QWidget(this);
    auto* tableLayout = new QVBoxLayout(tableBox);
    tableLayout->setContentsMargins(0, 0, 0, 0);
    m_view = new QTableView(tableBox);
    m_view->setModel(&m_table);
    m_view->verticalHeader()->hide();
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    tableLayout->addWidget(m_view);
    auto* exportRow = new QHBoxLayout;
    exportRow->addStretch();
    m_exportCsv = new QPushButton("Export table as CSV…", tableBox);
    m_exportCsv->setEnabled(false);
    exportRow->addWidget(m_exportCsv);
    tableLayout->addLayout(exportRow);

    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_chart);
    split->addWidget(tableBox);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QHBoxLayout(this);
    layout->addWidget(controls);
    layout->addWidget(split, 1);

    connect(m_run, &QPushButton::clicked, this, [this] { run(); });
    connect(m_cancel, &QPushButton::clicked, this, &WhatIfPage::cancel);
    connect(m_exportCsv, &QPushButton::clicked, this, &WhatIfPage::exportCsvInteractively);
    connect(m_specText, &QLineEdit::returnPressed, this, [this] { run(); });
    connect(&m_engine, &WhatIfEngine::resultReady, this, &WhatIfPage::resultArrived);
    connect(&m_engine, &WhatIfEngine::failed, this,
        [this](const QString& spec, const QString& message) { m_failures << spec + ": " + message; });
    connect(&m_engine, &WhatIfEngine::finished, this, &WhatIfPage::runEnded);
    setSelectedSpecs(defaultSpecs());
}

// In the order selectedSpecs() gives them back (checked policies first, then the text field).
QStringList WhatIfPage::defaultSpecs() { return { "pytorch", "ideal", "pytorch:expandable_segments:True" }; }

void WhatIfPage::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    m_engine.cancel();
    m_trace = std::move(trace);
    if (m_trace)
        m_table.setTrace(*m_trace);
    m_timelineModel.setTrace(m_trace);
    m_timelineModel.setContent({ {}, true });
    if (m_trace) {
        m_chart->axis().setEventIndex(eventIndexAxis(m_trace->trace));
        m_chart->setFullRange(fullRangeOf(*m_trace));
    }
    m_exportCsv->setEnabled(false);
    m_run->setEnabled(canReplay() || !m_trace);
    m_status->setText(!m_trace ? QString("Open a trace, choose policies and run.")
            : canReplay()      ? QString("Choose policies and run.")
                               : countersOnlyReason());
    emit curvesChanged({});
}

bool WhatIfPage::canReplay() const { return m_trace && m_trace->trace.memory().count() > 0; }

QString WhatIfPage::countersOnlyReason() const
{
    const QString text = m_trace ? countersOnlyText(m_trace->trace,
                             ", so there is nothing to replay. The Timeline page draws the recorded counters.")
                                 : QString();
    return text.isEmpty() ? QString("This trace has no memory events to replay.") : text;
}

QStringList WhatIfPage::selectedSpecs() const
{
    QStringList specs;
    for (int i = 0; i < m_policies->count(); ++i)
        if (m_policies->item(i)->checkState() == Qt::Checked)
            specs << m_policies->item(i)->text();
    for (const QString& s : policySpecsFromText(m_specText->text()))
        if (!specs.contains(s))
            specs << s;
    return specs;
}

void WhatIfPage::setSelectedSpecs(const QStringList& specs)
{
    QStringList rest;
    for (int i = 0; i < m_policies->count(); ++i)
        m_policies->item(i)->setCheckState(specs.contains(m_policies->item(i)->text()) ? Qt::Checked : Qt::Unchecked);
    for (const QString& s : specs)
        if (m_policies->findItems(s, Qt::MatchExactly).isEmpty())
            rest << s;
    m_specText->setText(rest.join("; "));
}

void WhatIfPage::setCapacityText(const QString& text) { m_capacity->setText(text); }

QString WhatIfPage::statusText() const { return m_status->text(); }

bool WhatIfPage::run()
{
    if (!m_trace) {
        m_status->setText("Open a trace first.");
        return false;
    }
    if (!canReplay()) {
        m_status->setText(countersOnlyReason());
        return false;
    }
    const QStringList specs = selectedSpecs();
    if (specs.isEmpty()) {
        m_status->setText("Check a policy or type a spec first.");
        return false;
    }
    Bytes capacity = 0;
    try {
        const QString c = m_capacity->text().trimmed();
        if (!c.isEmpty())
            capacity = parseBytes(c.toStdString(), "capacity");
        m_engine.start(m_trace, specs, capacity);
    } catch (const Error& e) {
        m_status->setText(QString::fromUtf8(e.what()));
        return false;
    }
    m_failures.clear();
    m_table.clearResults();
    m_timelineModel.setContent({ {}, true, capacity });
    emit curvesChanged({});
    m_run->setEnabled(false);
    m_cancel->setEnabled(true);
    m_exportCsv->setEnabled(false);
    m_status->setText(
        QString("Replaying %1 policies on %2 memory events…").arg(specs.size()).arg(m_trace->summary.memoryEvents));
    return true;
}

void WhatIfPage::cancel() { m_engine.cancel(); }

void WhatIfPage::resultArrived(int index)
{
    m_table.addResult(m_engine.results()[std::size_t(index)]);
    auto curves = m_engine.curves();
    m_timelineModel.setContent({ curves, true, m_engine.capacity() });
    m_status->setText(QString("%1 of %2 replays done…").arg(m_engine.results().size()).arg(m_engine.requested()));
    emit curvesChanged(std::move(curves));
}

void WhatIfPage::runEnded()
{
    m_run->setEnabled(true);
    m_cancel->setEnabled(false);
    m_exportCsv->setEnabled(!m_engine.results().empty());
    const int done = int(m_engine.results().size());
    QString text;
    if (done + m_failures.size() < m_engine.requested())
        text = QString("Cancelled: %1 of %2 replays done.").arg(done).arg(m_engine.requested());
    else
        text = QString("%1 of %2 replays done.").arg(done).arg(m_engine.requested());
    if (!m_failures.isEmpty())
        text += "\nFailed: " + m_failures.join("\n");
    // The same note `gpumem replay` prints: a profiler trace starts after the model was loaded.
    if (auto note = analyze::memoryBeforeTheTraceNote(m_table.openingAllocated()))
        text += "\nNote: " + QString::fromStdString(*note)
            + "; every replay holds it from the start, as `gpumem replay` does, but not the cache the allocator had "
              "reserved around it, which the trace does not show: their peak reserved figures are lower bounds (≥).";
    m_status->setText(text);
    emit finished();
}

void WhatIfPage::exportCsv(const QString& path) const
{
    std::ofstream out(path.toStdString(), std::ios::binary);
    if (!out)
        throw IoError("cannot write " + path.toStdString() + ": check that its folder exists and is writable");
    m_table.writeCsv(out);
    out.flush();
    if (!out)
        throw IoError("cannot write " + path.toStdString() + " (disk full?)");
}

bool WhatIfPage::exportCsvInteractively()
{
    const QString path = QFileDialog::getSaveFileName(this, "Export comparison", "what-if.csv", "CSV (*.csv)");
    if (path.isEmpty())
        return false;
    try {
        exportCsv(path);
    } catch (const Error& e) {
        QMessageBox::warning(this, "Export failed", QString::fromUtf8(e.what()));
        return false;
    }
    return true;
}

} // namespace gpumem::gui
