#include "gui/views/breakdown_page.h"
#include "gui/models/byte_text.h"

#include "core/units.h"
#include "gui/models/latest_request.h"
#include "gui/views/flame_graph_view.h"
#include "gui/views/treemap_view.h"

#include <QButtonGroup>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStackedWidget>
#include <QTextStream>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QRadioButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTreeView>
#include <QVBoxLayout>

namespace gpumem::gui {

using analyze::GroupBy;

BreakdownPage::BreakdownPage(QWidget* parent)
    : QWidget(parent)
{
    for (int g = 0; g < analyze::kGroupByCount; ++g)
        m_groups[std::size_t(g)] = std::make_unique<GroupTableModel>(static_cast<GroupBy>(g), this);
    m_atPeak = new QRadioButton("At the peak allocated", this);
    m_atPicked = new QRadioButton("At the picked instant", this);
    m_atPeak->setChecked(true);
    auto* group = new QButtonGroup(this);
    group->addButton(m_atPeak);
    group->addButton(m_atPicked);
    m_headline = new QLabel(this);
    m_headline->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_headline->setWordWrap(true);
    auto* bar = new QHBoxLayout;
    bar->addWidget(m_atPeak);
    bar->addWidget(m_atPicked);
    m_treeKind = new QComboBox(this);
    m_treeKind->addItems({ "module", "call stack" });
    m_treeKind->setToolTip("module: the scope tree and treemap; call stack: the code tree (folded stacks, outermost "
                           "frame first) and its flame graph");
    bar->addSpacing(16);
    bar->addWidget(new QLabel("Tree:", this));
    bar->addWidget(m_treeKind);
    bar->addSpacing(16);
    bar->addWidget(m_headline, 1);

    // Both trees: the name column stretches, the five figures fit their contents.
    auto treeView = [this](QAbstractItemModel* model) {
        auto* view = new QTreeView(this);
        view->setModel(model);
        view->setUniformRowHeights(true);
        view->setAlternatingRowColors(true);
        view->header()->setStretchLastSection(false);
        view->header()->setSectionResizeMode(0, QHeaderView::Stretch);
        for (int c = 1; c < 5; ++c)
            view->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
        return view;
    };
    m_tree = treeView(&m_modules);
    m_treemap = new TreemapView(this);

    auto* tables = new QTabWidget(this);
    const std::pair<GroupBy, const char*> tabs[] = {
        { GroupBy::Category, "Category" }, { GroupBy::SizeClass, "Size class" }, { GroupBy::Site, "Call site" }, { GroupBy::Stream, "Stream" }
    };
    for (const auto& [by, name] : tabs) {
        auto* view = new QTableView(tables);
        view->setModel(m_groups[std::size_t(by)].get());
        view->verticalHeader()->hide();
        view->setAlternatingRowColors(true);
        view->setWordWrap(false);
        view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
        view->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
        tables->addTab(view, name);
    }

    m_codeTree = treeView(&m_codeModel);
    m_flame = new FlameGraphView(this);
    m_flame->setWindowTitle("flame-graph");
    m_linesLabel = new QLabel("Select a frame of a source file in the code tree to see the live bytes per line of that file.", this);
    m_linesLabel->setWordWrap(true);
    m_lines = new QTableView(this);
    m_lines->setModel(&m_lineModel);
    m_lines->verticalHeader()->hide();
    m_lines->setWordWrap(false);
    m_lines->setShowGrid(false);
    m_lines->verticalHeader()->setDefaultSectionSize(m_lines->fontMetrics().height() + 2);
    m_lines->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_lines->horizontalHeader()->setStretchLastSection(true);
    auto* linesBox = new QWidget(this);
    auto* linesLayout = new QVBoxLayout(linesBox);
    linesLayout->setContentsMargins(0, 0, 0, 0);
    linesLayout->addWidget(m_linesLabel);
    linesLayout->addWidget(m_lines, 1);
    auto* codeRight = new QSplitter(Qt::Vertical, this);
    codeRight->addWidget(m_flame);
    codeRight->addWidget(linesBox);
    m_left = new QStackedWidget(this);
    m_left->addWidget(m_tree);
    m_left->addWidget(m_codeTree);
    m_right = new QStackedWidget(this);
    m_right->addWidget(m_treemap);
    m_right->addWidget(codeRight);

    auto* top = new QSplitter(Qt::Horizontal, this);
    top->addWidget(m_left);
    top->addWidget(m_right);
    top->setSizes({ 560, 640 });
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(top);
    split->addWidget(tables);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    connect(m_atPicked, &QRadioButton::toggled, this, [this] { refresh(); });
    connect(m_treemap, &TreemapView::rowClicked, this, [this](int row) {
        const QModelIndex i = m_modules.indexOfRow(row);
        m_tree->scrollTo(i);
        m_tree->setCurrentIndex(i);
    });
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentChanged, this,
        [this](const QModelIndex& current) { m_treemap->setSelectedRow(m_modules.rowOf(current)); });
    connect(m_treeKind, &QComboBox::activated, this, [this](int i) { setCallStackTree(i == 1); });
    // The flame graph's click selects the frame in the code tree; a frame of a file shows its lines.
    connect(m_flame, &FlameGraphView::nodeClicked, this, [this](analyze::CodeNodeId node) {
        const QModelIndex i = m_codeModel.indexOfNode(node);
        if (i.isValid()) {
            m_codeTree->scrollTo(i);
            m_codeTree->setCurrentIndex(i);
        }
    });
    connect(m_codeTree->selectionModel(), &QItemSelectionModel::currentChanged, this, [this](const QModelIndex& current) {
        const auto& tree = m_codeModel.tree();
        if (!tree || !current.isValid())
            return;
        const auto& node = tree->node(m_codeModel.nodeOf(current));
        if (!node.file.empty() && (m_lineModel.lines() == nullptr || m_lineModel.lines()->given != node.file))
            showLinesOf(QString::fromStdString(node.file));
        if (const int row = m_lineModel.rowOfLine(node.line); row >= 0 && m_lineModel.lines() && m_lineModel.lines()->given == node.file)
            m_lines->scrollTo(m_lineModel.index(row, 0), QAbstractItemView::PositionAtCenter);
    });
}

void BreakdownPage::setCallStackTree(bool callStack)
{
    m_treeKindChosen = true;
    showTreeKind(callStack);
}

void BreakdownPage::showTreeKind(bool callStack)
{
    m_treeKind->setCurrentIndex(callStack ? 1 : 0);
    m_left->setCurrentIndex(callStack ? 1 : 0);
    m_right->setCurrentIndex(callStack ? 1 : 0);
}

bool BreakdownPage::callStackTree() const { return m_left->currentIndex() == 1; }

void BreakdownPage::showLinesOf(const QString& file)
{
    if (!m_trace || !m_shown)
        return;
    auto trace = m_trace;
    auto shown = m_shown;
    const std::string path = file.toStdString();
    m_linesLabel->setText("Computing the live bytes per line of " + file + "…");
    runLatest(
        this, m_linesGeneration, ++*m_linesGeneration,
        [trace, shown, path, file] {
            auto lines = std::make_shared<const analyze::SourceLines>(analyze::attributeSourceLines(trace->trace, shown->liveAllocations, path));
            QStringList text;
            // The recorded path, else a file of that name beside the trace (a model file kept with it).
            QFile f(file);
            if (!f.exists())
                f.setFileName(QFileInfo(trace->path).dir().filePath(QFileInfo(file).fileName()));
            if (f.open(QIODevice::ReadOnly | QIODevice::Text)) {
                QTextStream in(&f);
                while (!in.atEnd())
                    text << in.readLine().replace('\t', "    ");
            }
            return std::make_pair(lines, text);
        },
        [file](BreakdownPage* self, std::pair<std::shared_ptr<const analyze::SourceLines>, QStringList> result) {
            const auto& l = *result.first;
            self->m_lineModel.setLines(result.first, result.second);
            self->m_linesLabel->setText(QString("%1: %2 of %3 live attributed to its lines (the innermost frame in the file)%4")
                                            .arg(file, bytesText(l.attributedBytes), bytesText(l.liveBytes))
                                            .arg(result.second.isEmpty() ? QString("; the file is not on this machine, so only its line numbers show") : QString()));
            emit self->sourceLinesShown();
        });
}

void BreakdownPage::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    ++*m_generation; // drop a picked-instant breakdown still being computed
    m_trace = std::move(trace);
    m_picked.reset();
    m_peak.reset();
    if (m_trace && !m_trace->analysis.breakdowns.empty())
        m_peak = std::shared_ptr<const analyze::Breakdown>(m_trace, &m_trace->analysis.breakdowns.front()); // no copy
    refresh();
}

void BreakdownPage::setAtPickedInstant(bool picked) { (picked ? m_atPicked : m_atPeak)->setChecked(true); }

void BreakdownPage::setPickedInstant(TimeNs time)
{
    m_picked = time;
    m_atPicked->setText("At the picked instant (+" + QString::fromStdString(formatSeconds(time - (m_trace ? m_trace->analysis.origin : 0))) + ")");
    if (m_atPicked->isChecked())
        refresh();
}

void BreakdownPage::refresh()
{
    if (!m_trace) {
        showBreakdown(nullptr);
        return;
    }
    if (!m_atPicked->isChecked() || !m_picked) {
        ++*m_generation;
        showBreakdown(m_peak);
        return;
    }
    auto trace = m_trace;
    const TimeNs t = *m_picked;
    m_headline->setText("Computing…");
    runLatest(
        this, m_generation, ++*m_generation,
        [trace, t]() -> std::shared_ptr<const analyze::Breakdown> {
            const auto& a = trace->analysis;
            const auto* device = a.timeline.device(a.device);
            if (!device)
                return nullptr;
            analyze::InstantSpec spec;
            spec.kind = analyze::InstantSpec::Kind::Time;
            spec.time = t;
            auto instant = analyze::resolveInstant(*device, spec);
            if (!instant)
                return nullptr;
            return std::make_shared<const analyze::Breakdown>(analyze::breakdownAt(trace->trace, *instant, a.categories, !a.categoriesRecorded));
        },
        [](BreakdownPage* self, std::shared_ptr<const analyze::Breakdown> b) {
            if (self->m_atPicked->isChecked())
                self->showBreakdown(b ? std::move(b) : self->m_peak);
        });
}

void BreakdownPage::showBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown)
{
    m_shown = std::move(breakdown);
    m_modules.setBreakdown(m_shown);
    for (auto& g : m_groups)
        g->setBreakdown(m_shown);
    m_treemap->setBreakdown(m_shown);
    m_tree->expandToDepth(1);
    // Open the path of the largest child down to the leaf: the root module holds nearly everything,
    // what the peak is made of is at the end of that path (OWLv2: … › Owlv2Attention_1 › aten::bmm).
    auto largestChild = [&](const QModelIndex& parent) {
        QModelIndex best;
        qulonglong bestBytes = 0;
        for (int r = 0; r < m_modules.rowCount(parent); ++r) {
            const QModelIndex i = m_modules.index(r, 2, parent);
            const qulonglong b = i.data(Qt::UserRole).toULongLong();
            if (!best.isValid() || b > bestBytes) {
                best = m_modules.index(r, 0, parent);
                bestBytes = b;
            }
        }
        return best;
    };
    for (QModelIndex i = largestChild({}); i.isValid(); i = largestChild(i))
        m_tree->expand(i);
    m_headline->setText(headline());
    // A trace without module scopes opens on the code tree rather than one "(no scope)" row.
    if (!m_treeKindChosen && m_shown) {
        const auto& rows = m_shown->by(GroupBy::Module);
        showTreeKind(rows.empty() || (rows.size() == 1 && rows.front().label == "(no scope)"));
    }
    m_codeModel.setTree(nullptr);
    m_flame->setTree(nullptr);
    m_lineModel.setLines(nullptr, {});
    ++*m_linesGeneration;
    if (m_trace && m_shown) {
        auto trace = m_trace;
        auto shown = m_shown;
        runLatest(
            this, m_codeGeneration, ++*m_codeGeneration,
            [trace, shown] { return std::make_shared<const analyze::CodeTree>(analyze::buildCodeTree(trace->trace, shown->liveAllocations)); },
            [](BreakdownPage* self, std::shared_ptr<const analyze::CodeTree> tree) {
                self->m_codeModel.setTree(tree);
                self->m_flame->setTree(tree);
                // Open the path of the largest child, as the module tree does, and select its deepest frame
                // of the program's own code (not torch/ or site-packages/): its file's lines show below.
                QModelIndex own;
                for (QModelIndex i = self->m_codeModel.index(0, 0); i.isValid(); i = self->m_codeModel.index(0, 0, i)) {
                    self->m_codeTree->expand(i);
                    const QString file = QString::fromStdString(tree->node(self->m_codeModel.nodeOf(i)).file).replace('\\', '/');
                    if (!file.isEmpty() && !file.contains("/torch/") && !file.contains("-packages/"))
                        own = i;
                }
                if (own.isValid())
                    self->m_codeTree->setCurrentIndex(own);
                emit self->codeTreeShown();
            });
    }
    emit breakdownShown();
}

QString BreakdownPage::headline() const
{
    if (!m_trace)
        return {};
    if (!m_shown)
    {
        if (!m_trace->analysis.empty)
            return "Nothing was allocated at this instant.";
        const QString countersOnly = countersOnlyText(m_trace->trace,
            ", so there are no live blocks to break down at a peak. The Timeline page draws the recorded counters.");
        return countersOnly.isEmpty() ? QString("This trace has no memory events to break down.") : countersOnly;
    }
    const auto& i = m_shown->instant;
    return QString("%1 at +%2 on %3: %4 live in %5%6")
        .arg(i.label.rfind("t=", 0) == 0 ? QString("picked instant") : QString::fromStdString(i.label), QString::fromStdString(formatSeconds(i.time - m_trace->analysis.origin)),
            QString::fromStdString(m_trace->analysis.deviceLabel), bytesText(m_shown->liveBytes))
        .arg(QString::fromStdString(counted(m_shown->liveBlocks, "block", "blocks")))
        .arg(m_shown->categoriesInferred ? " · categories inferred from the steps" : "");
}

} // namespace gpumem::gui
