#pragma once
// The Active memory page (issue #18 item 6): the ActiveMemoryView, N (the blocks drawn one by one)
// in a spin box, and the hovered block's details (size, requested size, alloc/free times, module,
// category, stack: describeBlock, the memory map's text). A trace without addresses says why there
// is nothing to draw. Owns its widgets and model; UI thread only.
#include "gui/models/active_memory_model.h"

#include <QWidget>

class QLabel;
class QPlainTextEdit;
class QSpinBox;

namespace gpumem::gui {

class ActiveMemoryView;

class ActiveMemoryPage : public QWidget {
    Q_OBJECT
public:
    explicit ActiveMemoryPage(QWidget* parent = nullptr);
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    ActiveMemoryView* view() const { return m_view; }
    ActiveMemoryModel& model() { return m_model; }
    void setTopCount(int n);
    QString detailsText() const;
    QString statusText() const;

signals:
    // A band was clicked: its block (MemoryMapIndex::blocks) and the clicked time.
    void blockPicked(std::size_t block, gpumem::TimeNs time);

private:
    ActiveMemoryModel m_model;
    std::shared_ptr<const LoadedTrace> m_trace;
    ActiveMemoryView* m_view = nullptr;
    QSpinBox* m_count = nullptr;
    QLabel* m_status = nullptr;
    QPlainTextEdit* m_details = nullptr;
};

} // namespace gpumem::gui
