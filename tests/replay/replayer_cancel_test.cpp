// ReplayOptions::cancel: the GUI's background what-if replays stop when their flag is raised.
#include "core/importer.h"
#include "core/trace_builder.h"
#include "replay/replayer.h"

#include <gtest/gtest.h>

#include <atomic>

using namespace gpumem;
using namespace gpumem::replay;

namespace {
Trace allocFreePairs(int pairs)
{
    TraceBuilder tb;
    const DeviceId gpu = tb.device(DeviceType::Cuda, 0);
    const StreamId stream = tb.stream(gpu, 0);
    TimeNs t = 1000;
    for (int i = 0; i < pairs; ++i)
        for (EventKind k : { EventKind::Alloc, EventKind::Free }) {
            MemoryEvent e;
            e.time = t++;
            e.kind = k;
            e.device = gpu;
            e.stream = stream;
            e.address = 0x10000;
            e.size = e.requestedSize = 4096;
            tb.add(e);
        }
    return tb.build();
}
} // namespace

TEST(ReplayerCancel, ARaisedFlagStopsTheRunWithCancelled)
{
    const Trace trace = allocFreePairs(10);
    std::atomic<bool> cancel { true };
    ReplayOptions options;
    options.cancel = &cancel;
    EXPECT_THROW(Replayer(options).run(trace, parsePolicySpec("pytorch")), Cancelled);
    cancel = false;
    const auto r = Replayer(options).run(trace, parsePolicySpec("pytorch"));
    EXPECT_EQ(r.allocations, 10u);
    EXPECT_EQ(r.peakAllocated.bytes, 4096u);
}
