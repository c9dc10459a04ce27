#include "gui/views/ranks_page.h"

#include "core/error.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace gpumem::gui {

RanksPage::RanksPage(QWidget* parent)
    : QWidget(parent)
    , m_model(new RanksTableModel(this))
    , m_table(new QTableView(this))
    , m_headline(new QLabel(this))
    , m_watcher(new QFutureWatcher<Outcome>(this))
{
    setObjectName("ranksPage");
    auto* layout = new QVBoxLayout(this);
    m_headline->setWordWrap(true);
    m_headline->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_headline->setText("Summarising the ranks…");
    layout->addWidget(m_headline);
    layout->addWidget(m_table, 1);
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    connect(m_table, &QTableView::activated, this, [this](const QModelIndex& index) {
        if (const QString path = m_model->pathAt(index.row()); !path.isEmpty())
            emit openRank(path);
    });
    connect(m_watcher, &QFutureWatcher<Outcome>::finished, this, [this] {
        Outcome o = m_watcher->result();
        if (!o.view) {
            m_model->clear();
            m_headline->setText("Cannot show the ranks: " + o.error);
            emit ready(false);
            return;
        }
        m_model->setView(std::move(*o.view));
        m_headline->setText(m_model->headline() + "\nDouble-click a rank to open its trace.");
        m_table->resizeColumnsToContents();
        emit ready(true);
    });
}

void RanksPage::load(const QStringList& arguments)
{
    std::vector<std::string> args;
    for (const auto& a : arguments)
        args.push_back(a.toStdString());
    m_headline->setText("Summarising the ranks…");
    m_watcher->setFuture(QtConcurrent::run([args] {
        Outcome o;
        try {
            o.view = analyze::buildJobView(analyze::summarizeRanks(analyze::rankTracePaths(args), {}, {}, 0));
        } catch (const std::exception& e) {
            o.error = QString::fromStdString(e.what());
        }
        return o;
    }));
}

QString RanksPage::statusText() const { return m_headline->text(); }

} // namespace gpumem::gui
