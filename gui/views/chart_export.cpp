#include "gui/views/chart_export.h"

#include "core/error.h"

#include <QAction>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QPainter>
#include <QSvgGenerator>
#include <QWidget>

namespace gpumem::gui {

void exportChart(QWidget& chart, const QString& path)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == "png") {
        if (!chart.grab().save(path, "PNG"))
            throw IoError("cannot write " + path.toStdString() + ": check that its folder exists and is writable");
        return;
    }
    if (suffix != "svg")
        throw UsageError("cannot export a chart as '" + suffix.toStdString() + "': name the file .png or .svg");
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(chart.size());
    svg.setViewBox(QRect(QPoint(0, 0), chart.size()));
    svg.setTitle(chart.windowTitle().isEmpty() ? QFileInfo(path).completeBaseName() : chart.windowTitle());
    svg.setDescription("gpumem-gui chart");
    QPainter painter;
    if (!painter.begin(&svg))
        throw IoError("cannot write " + path.toStdString() + ": check that its folder exists and is writable");
    chart.render(&painter, QPoint(), QRegion(), QWidget::DrawWindowBackground | QWidget::DrawChildren);
    painter.end();
    if (!QFileInfo(path).exists() || QFileInfo(path).size() == 0)
        throw IoError("cannot write " + path.toStdString() + ": check that its folder exists and is writable");
}

bool exportChartInteractively(QWidget& chart, QWidget* parent, const QString& suggestedName)
{
    QString selected;
    const QString path = QFileDialog::getSaveFileName(
        parent, "Export chart", suggestedName, "PNG image (*.png);;SVG drawing (*.svg)", &selected);
    if (path.isEmpty())
        return false;
    QString target = path;
    if (QFileInfo(target).suffix().isEmpty())
        target += selected.startsWith("SVG") ? ".svg" : ".png";
    try {
        exportChart(chart, target);
    } catch (const std::exception& e) {
        QMessageBox::warning(parent, "Export failed", QString::fromUtf8(e.what()));
        return false;
    }
    return true;
}

void addChartExportActions(QWidget& chart, const QString& suggestedName)
{
    // A widget that uses the right button itself (the timeline's rubber band) prevents the automatic
    // menu and opens its actions() on a plain right click instead.
    if (chart.contextMenuPolicy() != Qt::PreventContextMenu)
        chart.setContextMenuPolicy(Qt::ActionsContextMenu);
    QWidget* target = &chart;
    for (const char* format : { "png", "svg" }) {
        auto* action = new QAction(QString("Export as %1…").arg(QString(format).toUpper()), &chart);
        QObject::connect(action, &QAction::triggered, &chart, [target, suggestedName, format] {
            QString name = suggestedName;
            name = QFileInfo(name).completeBaseName() + "." + format;
            exportChartInteractively(*target, target->window(), name);
        });
        chart.addAction(action);
    }
}

} // namespace gpumem::gui
