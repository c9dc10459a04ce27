#include "gui/models/what_if_engine.h"

#include "core/error.h"
#include "core/importer.h"
#include "replay/policy_registry.h"
#include "replay/start_state.h"

#include <QCoreApplication>
#include <QPointer>
#include <QRegularExpression>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>

namespace gpumem::gui {

QStringList policySpecsFromText(const QString& text)
{
    QStringList specs;
    for (QString entry : text.split(QRegularExpression("[;\\n\\r]"), Qt::SkipEmptyParts)) {
        entry = entry.trimmed();
        if (entry.isEmpty())
            continue;
        const QString name = entry.section(QRegularExpression("[:@\\[]"), 0, 0).trimmed();
        const auto& policies = replay::registeredPolicies();
        const bool known = std::any_of(policies.begin(), policies.end(),
            [&](const replay::PolicyInfo& p) { return name == QString::fromStdString(p.name); });
        // A PYTORCH_CUDA_ALLOC_CONF string is key:value pairs; a lone word is a policy name, and an
        // unknown one gets the registry's "unknown policy …; valid policies: …" rather than a pytorch error.
        specs.push_back(known || !entry.contains(':') ? entry : "pytorch:" + entry);
    }
    return specs;
}

QColor simulatedCurveColor(int index)
{
    static const QColor colors[] = { QColor(230, 130, 0), QColor(0, 150, 150), QColor(170, 60, 200),
        QColor(110, 110, 110), QColor(210, 40, 140), QColor(120, 160, 0), QColor(140, 90, 40), QColor(0, 90, 200) };
    return colors[static_cast<std::size_t>(index) % std::size(colors)];
}

namespace {
    std::shared_ptr<const analyze::DeviceTimeline> curveOf(std::vector<replay::TimelinePoint> points, DeviceId device)
    {
        auto d = std::make_shared<analyze::DeviceTimeline>();
        d->device = device;
        d->reservedSource = "replay";
        d->time.reserve(points.size());
        d->reserved.reserve(points.size());
        d->allocated.reserve(points.size());
        for (const auto& p : points) {
            d->time.push_back(p.time);
            d->reserved.push_back(p.reserved);
            d->allocated.push_back(p.allocated);
        }
        return d;
    }
} // namespace

WhatIfEngine::WhatIfEngine(QObject* parent)
    : QObject(parent)
{
}

WhatIfEngine::~WhatIfEngine()
{
    if (m_cancel)
        m_cancel->store(true);
}

void WhatIfEngine::cancel()
{
    if (m_cancel)
        m_cancel->store(true);
    ++m_generation;
    const bool wasRunning = m_pending > 0;
    m_pending = 0;
    if (wasRunning)
        emit finished();
}

std::vector<SimulatedCurve> WhatIfEngine::curves() const
{
    std::vector<const WhatIfResult*> ordered;
    for (const auto& r : m_results)
        ordered.push_back(&r);
    std::sort(ordered.begin(), ordered.end(), [](auto* a, auto* b) { return a->order < b->order; });
    std::vector<SimulatedCurve> out;
    for (const auto* r : ordered) {
        out.push_back({ r->spec, r->color, r->curve, r->reservedLod, {} });
        for (const auto& f : r->result.failures)
            out.back().ooms.push_back(f.time);
    }
    return out;
}

void WhatIfEngine::start(std::shared_ptr<const LoadedTrace> trace, const QStringList& specs, Bytes capacity)
{
    std::vector<replay::PolicySpec> parsed;
    for (const QString& s : specs) {
        try {
            parsed.push_back(replay::parsePolicySpec(s.toStdString()));
            replay::validatePolicySpec(parsed.back());
        } catch (const UsageError& e) {
            throw UsageError("policy '" + s.toStdString() + "': " + e.what());
        }
    }
    cancel();
    m_results.clear();
    m_capacity = capacity;
    m_requested = int(parsed.size());
    if (!trace || parsed.empty())
        return;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    m_pending = int(parsed.size());
    const std::uint64_t generation = m_generation;
    QPointer<WhatIfEngine> self(this);
    for (std::size_t i = 0; i < parsed.size(); ++i) {
        (void)QtConcurrent::run([=, cancelFlag = m_cancel, spec = parsed[i], text = specs[int(i)]] {
            WhatIfResult out;
            out.spec = text;
            out.order = int(i);
            out.color = simulatedCurveColor(int(i));
            QString error;
            bool cancelled = cancelFlag->load();
            if (!cancelled) {
                try {
                    replay::ReplayOptions options;
                    options.capacity = capacity;
                    options.onOom = replay::OnOom::Skip;
                    options.recordTimeline = true;
                    options.cancel = cancelFlag.get();
                    if (!trace->analysis.empty)
                        options.device = trace->analysis.device;
                    // The start `gpumem replay` uses by default: the memory from before the trace is live.
                    replay::applyStartState(options, trace->trace, replay::StartState::Recorded);
                    out.result = replay::Replayer(options).run(trace->trace, spec);
                    out.curve = curveOf(std::move(out.result.timeline), out.result.device);
                    out.reservedLod = std::make_shared<const SeriesLod>(out.curve->time, out.curve->reserved);
                    out.result.timeline = {};
                } catch (const Cancelled&) {
                    cancelled = true;
                } catch (const std::exception& e) {
                    error = QString::fromUtf8(e.what());
                }
            }
            QMetaObject::invokeMethod(
                qApp,
                [self, generation, cancelled, error, out = std::move(out)]() mutable {
                    if (!self || self->m_generation != generation)
                        return; // cancelled or overtaken by a newer batch
                    if (!cancelled && error.isEmpty()) {
                        self->m_results.push_back(std::move(out));
                        emit self->resultReady(int(self->m_results.size()) - 1);
                    } else if (!cancelled) {
                        emit self->failed(out.spec, error);
                    }
                    if (self && --self->m_pending == 0)
                        emit self->finished();
                },
                Qt::QueuedConnection);
        });
    }
}

} // namespace gpumem::gui
