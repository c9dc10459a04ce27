#include "gui/views/diagnosis_page.h"

#include "core/error.h"

#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace gpumem::gui {

namespace {
    constexpr const char* kMomentLink = "gpumem:moment";
    constexpr const char* kFindingLink = "gpumem:finding/"; // + the finding's position
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
        const QString link = url.toString();
        if (link == kMomentLink)
            showMoment();
        else if (link.startsWith(kFindingLink))
            showFinding(link.mid(qsizetype(std::strlen(kFindingLink))).toULongLong());
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
            // Each finding's id (writeDiagnosis: "N. **`id`** (") links to its blocks on the map.
            for (std::size_t i = 0; i < m_diagnosis->findings.size(); ++i) {
                const analyze::Finding& f = m_diagnosis->findings[i];
                if (namedAllocations(f).empty())
                    continue;
                const QString head = QString("%1. **`%2`**").arg(i + 1).arg(QString::fromStdString(f.id));
                const qsizetype at = text.indexOf(head);
                if (at >= 0)
                    text.replace(at, head.size(),
                        QString("%1. [**`%2`**](%3%4)").arg(i + 1).arg(QString::fromStdString(f.id), kFindingLink).arg(i));
            }
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

void DiagnosisPage::showFinding(std::size_t finding)
{
    if (!m_diagnosis || m_diagnosis->countersOnly || finding >= m_diagnosis->findings.size())
        return;
    auto allocations = namedAllocations(m_diagnosis->findings[finding]);
    if (!allocations.empty())
        emit findingPicked(m_diagnosis->moment.time, std::move(allocations));
}

std::vector<std::uint32_t> DiagnosisPage::namedAllocations(const analyze::Finding& finding)
{
    std::vector<std::uint32_t> out;
    auto add = [&](const analyze::EvidenceBlock& b) {
        if (b.allocation && std::find(out.begin(), out.end(), *b.allocation) == out.end())
            out.push_back(*b.allocation);
    };
    for (const auto& b : finding.blocks)
        add(b);
    for (const auto& s : finding.segments)
        for (const auto& b : s.pinning)
            add(b);
    return out;
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
