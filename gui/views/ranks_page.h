#pragma once
// The viewer's Ranks page (`gpumem-gui TRACE TRACE… | DIR`): the job view of many ranks, one row per rank
// (gui/models/ranks_table_model.h), under its one-sentence answer. The summaries are computed on a worker
// thread (analyze::summarizeRanks); a double click (or Enter) on a row asks to open that rank's trace.
#include "gui/models/ranks_table_model.h"

#include <QFutureWatcher>
#include <QStringList>
#include <QWidget>

class QLabel;
class QTableView;

namespace gpumem::gui {

class RanksPage : public QWidget {
    Q_OBJECT
public:
    explicit RanksPage(QWidget* parent = nullptr);
    // Summarises the traces (files, or folders of them: analyze::rankTracePaths) in the background; emits
    // ready() when the table is shown or the error is.
    void load(const QStringList& arguments);
    RanksTableModel* model() const { return m_model; }
    QTableView* table() const { return m_table; }
    QString statusText() const;

signals:
    void ready(bool ok);
    // A rank picked: its trace, for a MainWindow to open.
    void openRank(const QString& path);

private:
    struct Outcome {
        std::optional<analyze::JobView> view;
        QString error;
    };
    RanksTableModel* m_model = nullptr;
    QTableView* m_table = nullptr;
    QLabel* m_headline = nullptr;
    QFutureWatcher<Outcome>* m_watcher = nullptr;
};

} // namespace gpumem::gui
