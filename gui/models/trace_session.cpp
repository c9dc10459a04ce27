#include "gui/models/trace_session.h"

#include "core/error.h"
#include "importers/importer_registry.h"
#include "gui/models/memory_map_model.h"

#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>

namespace gpumem::gui {

QString countersOnlyText(const Trace& trace, const QString& rest)
{
    const auto note = analyze::countersOnlyNote(trace);
    if (!note)
        return {};
    QString text = QString::fromStdString(*note);
    text[0] = text[0].toUpper();
    return text + rest;
}

TraceSession::TraceSession(QObject* parent)
    : QObject(parent)
{
}

TraceSession::~TraceSession()
{
    cancel();
    if (m_watcher)
        m_watcher->waitForFinished();
}


void TraceSession::cancel()
{
    if (m_cancel)
        m_cancel->store(true);
}

void TraceSession::open(const QString& path, std::optional<DeviceId> device)
{
    cancel();
    if (m_watcher) {
        m_watcher->disconnect(this);
        m_watcher->waitForFinished();
        m_watcher->deleteLater();
    }
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    m_loadingPath = path;
    m_watcher = new QFutureWatcher<Outcome>(this);
    auto cancelFlag = m_cancel;
    QPointer<TraceSession> self(this);
    connect(m_watcher, &QFutureWatcher<Outcome>::finished, this, [this, watcher = m_watcher] {
        Outcome o = watcher->result();
        if (o.cancelled)
            return;
        if (o.trace) {
            m_current = o.trace;
            emit loaded(o.trace);
        } else {
            emit failed(m_loadingPath, o.error);
        }
    });
    m_watcher->setFuture(QtConcurrent::run([path, device, cancelFlag, self]() -> Outcome {
        Outcome o;
        try {
            std::string p = path.toStdString();
            LoadOptions options;
            options.progress = [cancelFlag, self](double f) {
                if (self)
                    QMetaObject::invokeMethod(self.data(), [self, f] { if (self) emit self->progress(f); }, Qt::QueuedConnection);
                return !cancelFlag->load();
            };
            const Importer* importer = nullptr;
            auto loadedTrace = std::make_shared<LoadedTrace>();
            loadedTrace->path = path;
            loadedTrace->trace = loadTrace(p, options, &importer);
            loadedTrace->reader = importer ? QString::fromUtf8(importer->name().data(), qsizetype(importer->name().size())) : QString();
            loadedTrace->summary = analyze::summarize(loadedTrace->trace);
            analyze::AnalysisOptions analysisOptions;
            analysisOptions.progress = [cancelFlag](double) { return !cancelFlag->load(); };
            if (device && *device < loadedTrace->trace.devices().size())
                analysisOptions.device = device;
            else if (loadedTrace->trace.memory().count() == 0) // counters only: show the busiest counters
                analysisOptions.device = analyze::busiestCounterDevice(loadedTrace->summary);
            loadedTrace->analysis = analyze::analyzeTrace(loadedTrace->trace, analysisOptions);
            loadedTrace->lod = std::make_shared<const TimelineLod>(loadedTrace->trace,
                loadedTrace->analysis.timeline.device(loadedTrace->analysis.device), loadedTrace->analysis.device);
            loadedTrace->memoryMap = std::make_shared<const MemoryMapIndex>(buildMemoryMapIndex(
                loadedTrace->trace, loadedTrace->analysis.device, loadedTrace->analysis.categories));
            o.trace = std::move(loadedTrace);
        } catch (const Cancelled&) {
            o.cancelled = true;
        } catch (const std::exception& e) {
            o.error = QString::fromUtf8(e.what());
        }
        if (cancelFlag->load())
            o.cancelled = true;
        return o;
    }));
}

} // namespace gpumem::gui
