#pragma once
// Helpers shared by the GUI tests: public trace paths (skip when absent), loading a trace the way
// TraceSession does, waiting for the main window, and image checks.
#include "importers/importer_registry.h"
#include "gui/models/memory_map_model.h"
#include "gui/views/main_window.h"

#include <QImage>
#include <QSignalSpy>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace gpumem::gui::test {

inline std::string publicTrace(const char* relative) { return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative; }

#define REQUIRE_PUBLIC(path)                                                                     \
    if (!std::filesystem::exists(path))                                                          \
    GTEST_SKIP() << "public trace not found: " << (path) << " (set GPUMEM_PUBLIC_TRACES)"

inline std::shared_ptr<const LoadedTrace> load(const std::string& path)
{
    auto t = std::make_shared<LoadedTrace>();
    t->path = QString::fromStdString(path);
    t->trace = gpumem::loadTrace(path);
    t->analysis = analyze::analyzeTrace(t->trace);
    t->memoryMap = std::make_shared<const MemoryMapIndex>(buildMemoryMapIndex(t->trace, t->analysis.device, t->analysis.categories));
    return t;
}

inline bool singleColour(const QImage& image)
{
    const QRgb first = image.pixel(0, 0);
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x)
            if (image.pixel(x, y) != first)
                return false;
    return true;
}

inline bool waitLoaded(MainWindow& w)
{
    QSignalSpy spy(&w, &MainWindow::loadFinished);
    return spy.wait(60000) && spy.takeFirst().at(0).toBool();
}

// Shows `page` of a visible window of the given size.
inline void showPage(MainWindow& w, const char* page, QSize size)
{
    w.setQuietErrors(true);
    w.resize(size);
    w.show();
    ASSERT_TRUE(w.showPage(page));
}

} // namespace gpumem::gui::test
