#include "gui/views/active_memory_page.h"

#include "gui/models/timeline_model.h"
#include "gui/views/active_memory_view.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>

namespace gpumem::gui {

ActiveMemoryPage::ActiveMemoryPage(QWidget* parent)
    : QWidget(parent)
{
    m_view = new ActiveMemoryView(this);
    m_view->setWindowTitle("active-memory");
    m_count = new QSpinBox(this);
    m_count->setRange(1, 100000);
    m_count->setValue(int(kDefaultBandCount));
    m_count->setToolTip("The largest blocks are drawn one by one; all others are summed into the grey band at the bottom.");
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Blocks drawn one by one:", this));
    bar->addWidget(m_count);
    bar->addSpacing(16);
    bar->addWidget(m_status, 1);
    m_details = new QPlainTextEdit(this);
    m_details->setReadOnly(true);
    m_details->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_details->setPlaceholderText("Hover a band to see its block's size, alloc and free times and stack; click it to open it on the memory map.");
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_view);
    split->addWidget(m_details);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    split->setSizes({ 1000, 380 });
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    connect(m_count, &QSpinBox::valueChanged, this, [this](int n) { m_model.setTopCount(std::size_t(n)); });
    connect(m_view, &ActiveMemoryView::frameRequested, &m_model, &ActiveMemoryModel::request);
    connect(&m_model, &ActiveMemoryModel::frameReady, m_view, &ActiveMemoryView::setFrame);
    connect(&m_model, &ActiveMemoryModel::ready, m_view, &ActiveMemoryView::refresh);
    connect(m_view, &ActiveMemoryView::bandHovered, this, [this](std::optional<std::size_t>, const QString& text) {
        if (!text.isEmpty())
            m_details->setPlainText(text);
    });
    connect(m_view, &ActiveMemoryView::blockClicked, this, &ActiveMemoryPage::blockPicked);
    m_view->setLabeller([this](std::size_t block) {
        return m_trace && m_trace->memoryMap ? describeBlock(*m_trace, *m_trace->memoryMap, block) : QString();
    });
}

void ActiveMemoryPage::setTopCount(int n) { m_count->setValue(n); }
QString ActiveMemoryPage::detailsText() const { return m_details->toPlainText(); }
QString ActiveMemoryPage::statusText() const { return m_status->text(); }

void ActiveMemoryPage::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    m_trace = std::move(trace);
    m_details->clear();
    const MemoryMapIndex* index = m_trace ? m_trace->memoryMap.get() : nullptr;
    if (index && index->empty())
        m_status->setText(index->emptyReason);
    else if (index)
        m_status->setText(QString("%1 blocks on %2; hover a band for its stack, click it to open the block on the memory map.")
                              .arg(index->blocks.size())
                              .arg(index->deviceLabel));
    else
        m_status->clear();
    m_model.setTrace(m_trace);
    if (index && !index->empty())
        m_view->setFullRange(fullRangeOf(*m_trace), eventIndexAxis(m_trace->trace));
}

} // namespace gpumem::gui
