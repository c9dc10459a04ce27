#include "gui/views/memory_map_page.h"
#include "gui/models/byte_text.h"

#include "core/units.h"
#include "gui/views/memory_map_view.h"

#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace gpumem::gui {

MemoryMapPage::MemoryMapPage(QWidget* parent)
    : QWidget(parent)
{
    m_view = new MemoryMapView(this);
    m_colouring = new QComboBox(this);
    for (int c = 0; c < kMapColouringCount; ++c)
        m_colouring->addItem(toString(static_cast<MapColouring>(c)));
    m_instantLabel = new QLabel(this);
    m_instantLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Colour by:", this));
    bar->addWidget(m_colouring);
    bar->addSpacing(16);
    bar->addWidget(m_instantLabel, 1);

    m_table = new QTableView(this);
    m_table->setModel(&m_segments);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_details = new QPlainTextEdit(this);
    m_details->setReadOnly(true);
    m_details->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_details->setPlaceholderText("Click a block on the map to see its size, requested size, lifetime, module, category and stack.");

    m_eventTable = new QTableView(this);
    m_eventTable->setModel(&m_events);
    m_eventTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_eventTable->setSelectionMode(QAbstractItemView::SingleSelection);
    m_eventTable->verticalHeader()->hide();
    m_eventTable->verticalHeader()->setDefaultSectionSize(m_eventTable->fontMetrics().height() + 4);
    m_eventTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_eventTable->horizontalHeader()->setStretchLastSection(true);
    m_eventTable->setToolTip("The allocator's events: ↑/↓ step through them and the map shows the state after each; OOM rows are red.");

    auto* side = new QSplitter(Qt::Vertical, this);
    side->addWidget(m_eventTable);
    side->addWidget(m_table);
    side->addWidget(m_details);
    side->setStretchFactor(0, 2);
    side->setStretchFactor(1, 1);
    side->setStretchFactor(2, 1);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_view);
    split->addWidget(side);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    split->setSizes({ 860, 480 });

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    m_colouring->setCurrentIndex(int(m_view->colouring()));
    connect(m_colouring, &QComboBox::currentIndexChanged, this, [this](int i) { m_view->setColouring(static_cast<MapColouring>(i)); });
    connect(m_view, &MemoryMapView::frameRequested, &m_model, &MemoryMapModel::request);
    connect(&m_model, &MemoryMapModel::frameReady, this, &MemoryMapPage::frameArrived);
    connect(m_view, &MemoryMapView::blockClicked, this, [this](std::size_t block) {
        clearHighlight();
        selectBlock(block);
    });
    connect(m_view, &MemoryMapView::instantPicked, this, [this] { m_segments.setMarkedBlocks({}); });
    connect(m_view, &MemoryMapView::instantPicked, this, &MemoryMapPage::instantPicked);
    // Stepping through the events moves the instant to each event's time; the other pages follow.
    connect(m_eventTable->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
        if (m_followingInstant || !current.isValid() || !m_trace)
            return;
        const TimeNs t = m_events.timeOf(current.row());
        clearHighlight();
        showInstant(t);
        emit instantPicked(t);
    });
    // Choosing a segment in the table zooms the address axis to it.
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
        if (!current.isValid() || !m_trace || !m_trace->memoryMap || current.row() >= int(m_segments.rows().size()))
            return;
        const SegmentRow& row = m_segments.rows()[std::size_t(current.row())];
        if (auto offset = m_trace->memoryMap->offsetOf(row.address))
            m_view->setAddressWindow({ *offset, *offset + std::max<Bytes>(row.size, 1) });
    });
}

void MemoryMapPage::setColouring(MapColouring colouring) { m_colouring->setCurrentIndex(int(colouring)); }

void MemoryMapPage::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    m_trace = std::move(trace);
    m_model.setTrace(m_trace);
    m_segments.setRows({}, true);
    m_events.setTrace(m_trace && m_trace->memoryMap && !m_trace->memoryMap->empty() ? m_trace : nullptr,
        m_trace && m_trace->memoryMap ? m_trace->memoryMap->device : 0);
    m_details->clear();
    m_instantLabel->clear();
    m_view->setTrace(m_trace);
    m_selectOnFrame = true;
    if (m_trace && m_trace->memoryMap && !m_trace->memoryMap->empty()) {
        const auto& breakdowns = m_trace->analysis.breakdowns;
        setInstant(!breakdowns.empty() ? breakdowns.front().instant.time : m_trace->memoryMap->time.end - 1);
    } else if (m_trace && m_trace->memoryMap) {
        m_instantLabel->setText(m_trace->memoryMap->emptyReason);
        m_instantLabel->setWordWrap(true);
    }
}

void MemoryMapPage::setInstant(TimeNs time)
{
    clearHighlight();
    showInstant(time);
}

void MemoryMapPage::clearHighlight()
{
    m_view->setHighlightedBlocks({});
    m_segments.setMarkedBlocks({});
}

void MemoryMapPage::highlightAllocations(TimeNs time, const std::vector<std::uint32_t>& allocations)
{
    if (!m_trace || !m_trace->memoryMap || m_trace->memoryMap->empty())
        return;
    const MemoryMapIndex& index = *m_trace->memoryMap;
    std::vector<std::size_t> blocks;
    for (std::uint32_t a : allocations)
        if (a < index.blockOfAllocation.size() && index.blockOfAllocation[a] >= 0)
            blocks.push_back(std::size_t(index.blockOfAllocation[a]));
    showInstant(time);
    m_selectOnFrame = false; // the named block, not the largest, is the one to show
    if (!blocks.empty())
        selectBlock(blocks.front());
    std::vector<Address> addresses;
    for (std::size_t b : blocks)
        addresses.push_back(index.blocks[b].address);
    m_segments.setMarkedBlocks(std::move(addresses));
    m_view->setHighlightedBlocks(std::move(blocks));
}

void MemoryMapPage::showInstant(TimeNs time)
{
    if (!m_trace || !m_trace->memoryMap || m_trace->memoryMap->empty())
        return;
    m_instantLabel->setText(QString("At %1: computing…").arg(momentText(time)));
    m_view->setInstant(time);
    // The event list shows the last event at or before the instant (unless it was the one stepped to).
    if (m_events.rowCount() > 0) {
        const int row = m_events.rowAt(time);
        const QModelIndex current = m_eventTable->currentIndex();
        if (!current.isValid() || m_events.timeOf(current.row()) != time) {
            m_followingInstant = true;
            m_eventTable->setCurrentIndex(m_events.index(row, 0));
            m_eventTable->scrollTo(m_events.index(row, 0), QAbstractItemView::PositionAtCenter);
            m_followingInstant = false;
        }
    }
}

QString MemoryMapPage::momentText(TimeNs time) const
{
    if (eventIndexAxis(m_trace->trace))
        return QString("event %1").arg(time - 1); // entry i at i + 1 ns
    return "+" + QString::fromStdString(formatSeconds(time - m_trace->analysis.origin));
}

void MemoryMapPage::stepToEvent(int row)
{
    if (row < 0 || row >= m_events.rowCount())
        return;
    m_eventTable->setCurrentIndex(m_events.index(row, 0));
}

void MemoryMapPage::setTimeRange(TimeRange range) { m_view->setTimeRange(range); }

void MemoryMapPage::frameArrived(const std::shared_ptr<const MemoryMapFrame>& frame)
{
    m_view->setFrame(frame);
    if (m_view->frame() != frame || !frame->instant || !m_trace)
        return;
    const MemoryMapIndex& index = *m_trace->memoryMap;
    const MemoryMapState& s = frame->state;
    m_segments.setRows(s.segments, index.hasSegments);
    if (m_selectOnFrame && s.largestBlock)
        selectBlock(*s.largestBlock);
    m_selectOnFrame = false;
    // counted(): "1 block", not "1 blocks" (review finding).
    QString extra;
    if (s.pendingBlocks)
        extra += QString("; pending frees %1 in %2").arg(bytesText(s.pending), QString::fromStdString(counted(s.pendingBlocks, "block", "blocks")));
    if (s.roundingWaste)
        extra += QString("; rounding waste %1").arg(bytesText(s.roundingWaste));
    const int row = m_eventTable->currentIndex().isValid() ? m_eventTable->currentIndex().row() : -1;
    const QString eventText = row >= 0 && m_events.timeOf(row) == s.time ? QString(" (after event #%1%2)").arg(row).arg(m_events.isOom(row) ? ", an OOM" : "") : QString();
    m_instantLabel->setText(QString("At %1%6: %2 allocated in %3, %4%5%7")
                                .arg(momentText(s.time),
                                    bytesText(s.allocated), QString::fromStdString(counted(s.blocks, "block", "blocks")),
                                    QString::fromStdString(index.hasSegments
                                            ? counted(s.segments.size(), "segment", "segments")
                                            : counted(s.segments.size(), "address range", "address ranges")),
                                    index.hasSegments ? QString() : QString(" (no segment events in this trace)"), eventText, extra));
}

void MemoryMapPage::selectBlock(std::size_t block)
{
    if (!m_trace || !m_trace->memoryMap || block >= m_trace->memoryMap->blocks.size())
        return;
    m_view->setSelectedBlock(block);
    m_details->setPlainText(describeBlock(*m_trace, *m_trace->memoryMap, block));
}

QString MemoryMapPage::detailsText() const { return m_details->toPlainText(); }
QString MemoryMapPage::instantText() const { return m_instantLabel->text(); }

} // namespace gpumem::gui
