// gpumem-gui [TRACE] — the desktop viewer.
#include "gui/views/diagnosis_page.h"
#include "gui/views/main_window.h"
#include "gui/views/ranks_page.h"
#include "gui/views/what_if_page.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QEventLoop>
#include <QFileInfo>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <string_view>

int main(int argc, char** argv)
{
    // --screenshot, --help and --version need no window system: without a display, use Qt's offscreen
    // platform instead of aborting in the xcb plugin.
    if (!std::getenv("QT_QPA_PLATFORM") && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
        for (int i = 1; i < argc; ++i) {
            const std::string_view a = argv[i];
            if (a == "--screenshot" || a.starts_with("--screenshot=") || a == "-h" || a == "--help" || a == "-v"
                || a == "--version" || a == "--help-all") {
                setenv("QT_QPA_PLATFORM", "offscreen", 1);
                break;
            }
        }
    QApplication app(argc, argv);
    QApplication::setApplicationName("gpumem-gui");
    QApplication::setApplicationVersion(GPUMEM_VERSION);
    QCommandLineParser parser;
    parser.setApplicationDescription("gpumem viewer: GPU memory traces, fragmentation and allocator what-ifs");
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument("trace", "trace file to open (any format gpumem reads); several traces or a folder of them "
                                          "open the Ranks page of one job (gpumem ranks), a double click opens a rank");
    QCommandLineOption screenshot("screenshot",
        "render PAGE (diagnosis, summary, timeline, memory-map, breakdown, what-if) of TRACE to OUT.png offscreen and exit: --screenshot PAGE OUT.png TRACE", "PAGE");
    parser.addOption(screenshot);
    QCommandLineOption policy("policy",
        "replay TRACE with policy SPEC on the What-if page (repeatable; SPEC or a PYTORCH_CUDA_ALLOC_CONF string); "
        "--screenshot what-if without --policy runs pytorch, ideal and pytorch:expandable_segments:True", "SPEC");
    parser.addOption(policy);
    QCommandLineOption capacity("capacity", "device capacity for the What-if replays, e.g. 40GiB (default unlimited)", "BYTES");
    parser.addOption(capacity);
    QCommandLineOption device("device", "device index to show, as `gpumem info` lists them (default: the busiest)", "D");
    parser.addOption(device);
    parser.process(app);
    std::optional<gpumem::DeviceId> deviceIndex;
    if (parser.isSet(device)) {
        bool number = false;
        const uint d = parser.value(device).toUInt(&number);
        if (!number || d > 65535) {
            std::fprintf(stderr, "gpumem-gui: --device '%s' is not a device index (0, 1, …; see 'gpumem info')\n",
                qPrintable(parser.value(device)));
            return 2;
        }
        deviceIndex = gpumem::DeviceId(d);
    }
    qRegisterMetaType<std::shared_ptr<const gpumem::gui::LoadedTrace>>();
    gpumem::gui::MainWindow window;
    if (parser.isSet(screenshot)) {
        const QStringList args = parser.positionalArguments();
        if (args.size() != 2) {
            std::fprintf(stderr, "gpumem-gui: --screenshot PAGE OUT.png TRACE needs the output file and the trace\n");
            return 2;
        }
        window.setQuietErrors(true);
        window.resize(1400, 900);
        if (!window.showPage(parser.value(screenshot))) {
            std::fprintf(stderr, "gpumem-gui: unknown page '%s'; pages: diagnosis, summary, timeline, memory-map, breakdown, what-if\n", qPrintable(parser.value(screenshot)));
            return 2;
        }
        window.show();
        bool ok = false, badSpec = false;
        QEventLoop loop;
        QStringList specs = parser.values(policy);
        if (specs.isEmpty() && parser.value(screenshot) == "what-if")
            specs = gpumem::gui::WhatIfPage::defaultSpecs();
        auto* whatIf = window.whatIfPage();
        // The Diagnosis page is computed on a worker thread after the load: wait for it.
        const bool diagnosisShot = parser.value(screenshot) == "diagnosis";
        if (auto* diagnosis = window.findChild<gpumem::gui::DiagnosisPage*>("diagnosisPage"); diagnosis && diagnosisShot)
            QObject::connect(diagnosis, &gpumem::gui::DiagnosisPage::ready, &loop,
                [&] { QTimer::singleShot(300, &loop, &QEventLoop::quit); });
        QObject::connect(whatIf, &gpumem::gui::WhatIfPage::finished, &loop,
            [&] { QTimer::singleShot(500, &loop, &QEventLoop::quit); }); // the curves' frames arrive
        QObject::connect(&window, &gpumem::gui::MainWindow::loadFinished, &loop, [&](bool success) {
            ok = success;
            if (success && !specs.isEmpty() && whatIf->canReplay()) { // else the page shows why not
                whatIf->setSelectedSpecs(specs);
                whatIf->setCapacityText(parser.value(capacity));
                if (whatIf->run())
                    return;
                std::fprintf(stderr, "gpumem-gui: %s\n", qPrintable(whatIf->statusText()));
                ok = false;
                badSpec = true;
            }
            // A diagnosis quits the loop when it is ready (at most 2 minutes: a trace it cannot explain
            // still emits ready, this only bounds the wait).
            QTimer::singleShot(success && diagnosisShot ? 120000 : 500, &loop, &QEventLoop::quit);
        });
        window.openTrace(args[1], deviceIndex);
        loop.exec();
        if (badSpec)
            return 2; // a usage error, as gpumem's
        if (!ok) {
            std::fprintf(stderr, "gpumem-gui: %s\n", qPrintable(window.statusMessage()));
            return 1;
        }
        if (!window.grab().save(args[0])) {
            std::fprintf(stderr, "gpumem-gui: cannot write %s\n", qPrintable(args[0]));
            return 1;
        }
        return 0;
    }
    // Several traces, or a folder: the ranks of one job, one row each; a rank opens in its own window.
    if (const QStringList traces = parser.positionalArguments(); traces.size() > 1 || (traces.size() == 1 && QFileInfo(traces.front()).isDir())) {
        gpumem::gui::RanksPage ranks;
        ranks.setWindowTitle("gpumem-gui: ranks");
        ranks.resize(1200, 600);
        QObject::connect(&ranks, &gpumem::gui::RanksPage::openRank, &ranks, [&](const QString& path) {
            auto* w = new gpumem::gui::MainWindow;
            w->setAttribute(Qt::WA_DeleteOnClose);
            w->show();
            w->openTrace(path, deviceIndex);
        });
        ranks.show();
        ranks.load(traces);
        return app.exec();
    }
    window.show();
    if (parser.isSet(policy) || parser.isSet(capacity)) {
        window.whatIfPage()->setSelectedSpecs(parser.values(policy));
        window.whatIfPage()->setCapacityText(parser.value(capacity));
    }
    if (!parser.positionalArguments().isEmpty())
        window.openTrace(parser.positionalArguments().first(), deviceIndex);
    return app.exec();
}
