// gpumem-gui [TRACE] — the desktop viewer.
#include "gui/views/main_window.h"

#include <QApplication>
#include <QCommandLineParser>

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName("gpumem-gui");
    QApplication::setApplicationVersion(GPUMEM_VERSION);
    QCommandLineParser parser;
    parser.setApplicationDescription("gpumem viewer: GPU memory traces, fragmentation and allocator what-ifs");
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument("trace", "trace file to open (any format gpumem reads)");
    parser.process(app);
    qRegisterMetaType<std::shared_ptr<const gpumem::gui::LoadedTrace>>();
    gpumem::gui::MainWindow window;
    window.show();
    if (!parser.positionalArguments().isEmpty())
        window.openTrace(parser.positionalArguments().first());
    return app.exec();
}
