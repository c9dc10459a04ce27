#pragma once
// The main window: opens traces (command line, File → Open, recent files, drag and drop) through a
// TraceSession and shows the summary of the loaded trace. Owns its widgets (Qt parent ownership).
#include "gui/models/trace_session.h"

#include <QMainWindow>

class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QMenu;

namespace gpumem::gui {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    void openTrace(const QString& path);
    TraceSession& session() { return m_session; }
    // The summary text currently shown (for tests).
    QString summaryText() const;

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

    TraceSession m_session;
    QPlainTextEdit* m_summary = nullptr;
    QProgressBar* m_progress = nullptr;
    QPushButton* m_cancel = nullptr;
    QMenu* m_recent = nullptr;
    bool m_quietErrors = false;

public:
    // Tests: report load errors in the status bar instead of a modal dialog.
    void setQuietErrors(bool quiet) { m_quietErrors = quiet; }
};

} // namespace gpumem::gui
