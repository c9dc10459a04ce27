#pragma once
// Chart export shared by every page (issue #7 item 6): renders a chart widget (the timeline, the
// what-if curves, the memory map, the breakdown) to PNG (a raster at the widget's size and the
// screen's pixel ratio) or SVG (Qt SVG's QSvgGenerator records the widget's QPainter calls as
// vector elements). Free functions; call on the UI thread.
#include <QString>

class QWidget;

namespace gpumem::gui {

// Writes `chart` to `path`; the format follows the suffix (.png or .svg, case-insensitive).
// Throws gpumem::UsageError for another suffix, gpumem::IoError when the file cannot be written.
void exportChart(QWidget& chart, const QString& path);
// Asks for a file name (PNG or SVG) and exports; shows a message box on failure. `parent` owns
// the dialog. Returns true when a file was written.
bool exportChartInteractively(QWidget& chart, QWidget* parent, const QString& suggestedName);
// Adds "Export as PNG…" and "Export as SVG…" to `chart`'s actions and shows them as its context menu
// (Qt::ActionsContextMenu, unless the widget set Qt::PreventContextMenu to open them itself).
void addChartExportActions(QWidget& chart, const QString& suggestedName);

} // namespace gpumem::gui
