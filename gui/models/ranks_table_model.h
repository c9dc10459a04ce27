#pragma once
// The viewer's Ranks page model: one row per rank of a job view (analyze/job_view.h), with the columns of
// `gpumem ranks`' table (the same cells, analyze::rankTable) and the rank's trace last. A
// QAbstractTableModel without widgets; lives on the UI thread; the view is set whole (computed elsewhere).
#include "analyze/job_view.h"

#include <QAbstractTableModel>

#include <optional>

namespace gpumem::gui {

class RanksTableModel final : public QAbstractTableModel {
    Q_OBJECT
public:
    // Qt::UserRole gives the row's trace path (a QString), what the page opens on a double click.
    static constexpr int PathRole = Qt::UserRole;

    explicit RanksTableModel(QObject* parent = nullptr);
    void setView(analyze::JobView view);
    void clear();
    const analyze::JobView* view() const { return m_view ? &*m_view : nullptr; }
    // The answer in one sentence (analyze::jobViewHeadline); empty before a view is set.
    QString headline() const;
    // The trace of the rank in `row`; empty for a row out of range.
    QString pathAt(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::optional<analyze::JobView> m_view;
    analyze::JobViewTable m_table;
};

} // namespace gpumem::gui
