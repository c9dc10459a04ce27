#include "gui/views/diagnosis_page.h"

#include "core/error.h"

#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <sstream>

namespace gpumem::gui {

namespace {
    constexpr const char* kMomentLink = "gpumem:moment";
}

DiagnosisPage::DiagnosisPage(QWidget* parent)
    : QWidget(parent)
    , m_browser(new QTextBrowser(this))
    , m_watcher(new QFutureWatcher<Outcome>(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_browser);
    m_browser->setOpenLinks(false);
    m_browser->setPlaceholderText("Open a trace: why it ran out of memory (gpumem explain) appears here.");
    connect(m_browser, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.toString() == kMomentLink)
            showMoment();
    });
    connect(m_watcher, &QFutureWatcher<Outcome>::finished, this, [this] {
        Outcome o = m_watcher->result();
        m_diagnosis = std::move(o.diagnosis);
        if (!m_diagnosis) {
            m_browser->setMarkdown("**No diagnosis:** " + o.error);
            emit ready(false);
            return;
        }
        std::ostringstream md;
        analyze::writeDiagnosis(*m_diagnosis, "markdown", m_trace ? m_trace->analysis.origin : 0, md);
        QString text = QString::fromStdString(md.str());
        if (!m_diagnosis->countersOnly) {
            // Right under the verdict: the memory map at the moment explained.
            const qsizetype end = text.indexOf("\n\n");
            text.insert(end < 0 ? text.size() : end + 2,
                QString("[Show this moment in the memory map](%1)\n\n").arg(kMomentLink));
        }
        m_browser->setMarkdown(text);
        emit ready(m_diagnosis->moment.isOom());
    });
}

void DiagnosisPage::showMoment()
{
    if (m_diagnosis && !m_diagnosis->countersOnly)
        emit instantPicked(m_diagnosis->moment.time);
}

void DiagnosisPage::setTrace(const std::shared_ptr<const LoadedTrace>& trace)
{
    m_trace = trace;
    m_diagnosis.reset();
    m_browser->setMarkdown("*Diagnosing…* (replaying the trace and the candidate settings)");
    // The capture keeps the LoadedTrace alive; the diagnosis only reads it.
    m_watcher->setFuture(QtConcurrent::run([trace]() -> Outcome {
        Outcome o;
        try {
            analyze::DiagnosisOptions options;
            options.device = trace->analysis.device;
            if (!trace->analysis.empty && !trace->analysis.countersOnly)
                options.analysis = &trace->analysis;
            o.diagnosis = analyze::diagnose(trace->trace, options);
        } catch (const Error& e) {
            o.error = QString::fromUtf8(e.what());
        }
        return o;
    }));
}

} // namespace gpumem::gui
