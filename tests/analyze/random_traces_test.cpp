// Property checks on random (often inconsistent) traces: double frees, frees of unknown blocks,
// blocks outside segments, overlapping segments, events on two devices and streams, markers and
// annotations. The analysis must not crash and its sums must hold. Fixed seeds: deterministic.
#include "analyze/analysis_report.h"
#include "analyze/html_report.h"
#include "analyze/trace_diff.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <sstream>

using namespace gpumem;
using namespace gpumem::analyze;

namespace {
Trace randomTrace(std::uint32_t seed)
{
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
    TraceBuilder b;
    const DeviceId devs[] = { b.device(DeviceType::Cuda, 0), b.device(DeviceType::Cuda, 1) };
    const StreamId streams[] = { b.stream(devs[0], 0), b.stream(devs[0], 7), b.stream(devs[1], 0) };
    ScopeId scopes[4] = { 0, b.scope(0, "A", ScopeKind::Module), 0, 0 };
    scopes[2] = b.scope(scopes[1], "A.b", ScopeKind::Module);
    scopes[3] = b.scope(0, pick(2) ? "Optimizer.step#X" : "backward", ScopeKind::Range);
    const FrameId f[] = { b.frame("<built-in method x of y at 0x1234>", "", 0), b.frame("f", "m.py", 3) };
    const SiteId site = b.site(f);
    const int n = 200 + static_cast<int>(pick(800));
    for (int i = 0; i < n; ++i) {
        MemoryEvent e;
        e.time = static_cast<TimeNs>(pick(100000));
        e.kind = static_cast<EventKind>(pick(kEventKindCount));
        e.stream = streams[pick(3)];
        e.device = e.stream == streams[2] ? devs[1] : devs[0];
        e.address = 0x10000 + pick(64) * 0x1000;
        e.size = e.kind == EventKind::Marker ? 0 : 512 * (1 + pick(16));
        e.requestedSize = pick(2) ? e.size - pick(e.size) : 0;
        e.scope = scopes[pick(4)];
        e.site = pick(2) ? site : 0;
        e.category = static_cast<Category>(pick(kCategoryCount));
        b.add(e);
    }
    for (int i = 0; i < 6; ++i) {
        const auto start = static_cast<TimeNs>(pick(100000));
        b.add(Annotation { start, start + static_cast<TimeNs>(pick(20000)), b.intern(pick(2) ? "ProfilerStep#" + std::to_string(i) : "step"),
            AnnotationKind::Range, kNoDevice, 0 });
    }
    return b.build();
}
} // namespace

TEST(RandomTraces, AnalysisHoldsItsSumsOnInconsistentInput)
{
    for (std::uint32_t seed = 1; seed <= 60; ++seed) {
        SCOPED_TRACE(seed);
        Trace t = randomTrace(seed);
        AnalysisOptions o;
        o.instants = { InstantSpec {}, InstantSpec { InstantSpec::Kind::PeakReserved, 0 },
            InstantSpec { InstantSpec::Kind::Time, t.memory().time[t.memory().count() / 2] } };
        auto a = analyzeTrace(t, o);
        const auto* d = a.timeline.device(a.device);
        ASSERT_NE(d, nullptr);
        for (const auto& b : a.breakdowns) {
            EXPECT_EQ(b.liveBytes, d->allocated[b.instant.point]);
            for (int g = 0; g < kGroupByCount; ++g) {
                Bytes sum = 0;
                for (const auto& r : b.by(static_cast<GroupBy>(g)))
                    sum += r.depth == 0 ? r.totalBytes : 0;
                EXPECT_EQ(sum, b.liveBytes) << toString(static_cast<GroupBy>(g));
            }
            for (const auto& r : b.by(GroupBy::Site))
                EXPECT_EQ(r.key.find("0x"), std::string::npos);
        }
        for (std::size_t i = 0; i < d->size(); ++i) {
            if (auto w = d->waste(i)) {
                EXPECT_TRUE(*w >= 0 && *w <= 1);
            }
            if (auto x = d->external(i)) {
                EXPECT_TRUE(*x >= 0 && *x <= 1);
            }
        }
        auto buckets = d->buckets(SeriesKind::Allocated, a.timeline.start(), a.timeline.end() + 1, 37);
        for (const auto& k : buckets) {
            if (k.valid) {
                EXPECT_TRUE(k.min <= k.last && k.last <= k.max);
            }
        }
        std::ostringstream text, csv, html;
        writeAnalysisText(t, a, "random", {}, text);
        writeAnalysisCsv(a, "random", {}, csv);
        (void)analysisToJson(t, a, "random", {}).dump();
        HtmlReportInput in { "random", &t, &a };
        writeHtmlReport(std::span(&in, 1), {}, {}, html);
        EXPECT_NE(html.str().find("</html>"), std::string::npos);
        if (!a.breakdowns.empty()) {
            EXPECT_TRUE(diffAnalyses(a, a).rows.empty());
        }
    }
}
