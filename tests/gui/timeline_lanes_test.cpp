// The Timeline and What-if charts' lanes after issue #18: the fragmentation lane is half the memory
// lane's height, the steps lane is analyze::detectSteps' (what `gpumem analyze` prints), a what-if
// capacity draws a line and each OOM a mark, and a snapshot without timestamps gets an event axis.
#include "gui/models/timeline_model.h"
#include "gui/views/timeline_view.h"
#include "gui_test_support.h"

using namespace gpumem;
using namespace gpumem::gui;
using namespace gpumem::gui::test;

TEST(TimelineLanes, FragmentationLaneIsHalfTheMemoryLanesHeight)
{
    auto t = load(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl");
    TimelineFrame f = computeFrame(*t, fullRangeOf(*t), 400);
    ASSERT_EQ(f.lanes.size(), 2u);
    EXPECT_EQ(f.lanes[0].relativeHeight, 1.0);
    EXPECT_EQ(f.lanes[1].relativeHeight, 0.5);
    TimelineView view;
    view.resize(1000, 800);
    view.setFillHeight(true);
    view.setFullRange(fullRangeOf(*t));
    f = computeFrame(*t, view.axis().visible(), view.axis().width());
    view.setFrame(std::move(f));
    EXPECT_NEAR(view.laneHeight(1), view.laneHeight(0) / 2.0, 1.0);
    EXPECT_GT(view.laneHeight(0), TimelineView::kLaneHeight); // the memory lane takes the room
}

TEST(TimelineLanes, StepsLaneIsTheAnalysisSteps)
{
    // No step annotations: gpumem analyze finds three steps between the four markers (0, 10, 20 µs).
    auto t = load(GPUMEM_SOURCE_DIR "/tests/data/marker_steps.jsonl");
    ASSERT_EQ(t->analysis.steps.source, analyze::StepSource::Marker);
    ASSERT_EQ(t->analysis.steps.steps.size(), 3u);
    const auto& time = t->trace.memory().time;
    const TimeRange range { time.front(), time.back() + 1 }; // 30 µs + 1 ns over 3001 px: 10 ns per px
    const TimelineFrame f = computeFrame(*t, range, 3001);
    ASSERT_FALSE(f.rows.empty());
    EXPECT_EQ(f.rows[0].title, "steps");
    ASSERT_EQ(f.rows[0].boxes.size(), 3u);
    EXPECT_EQ(f.rows[0].boxes[0].label, "step 0");
    EXPECT_EQ(f.rows[0].boxes[2].label, "step 2");
    EXPECT_NEAR(f.rows[0].boxes[1].x0, 1000.0, 1.0); // step 1 starts at +10 µs
}

TEST(TimelineLanes, CapacityLineAndOomMarks)
{
    auto t = load(GPUMEM_SOURCE_DIR "/tests/data/snapshot/viewer_no_timestamps.json");
    const TimeRange range = t->memoryMap->time; // entries 0–8 at 1–9 ns
    ASSERT_EQ(range, (TimeRange { 1, 10 }));
    FrameContent content;
    content.memoryLaneOnly = true;
    content.capacity = 3 << 20;
    auto curve = std::make_shared<analyze::DeviceTimeline>(*t->analysis.timeline.device(t->analysis.device));
    content.simulated.push_back({ "pytorch", QColor(0, 128, 0), curve, nullptr, { 3 } });
    const TimelineFrame f = computeFrame(*t, range, int(range.length()));
    ASSERT_FALSE(f.lanes.empty());
    EXPECT_FALSE(f.lanes[0].capacity); // no what-if capacity: no line
    ASSERT_EQ(f.lanes[0].marks.size(), 1u); // the recorded OOM, entry 6 at 7 ns
    EXPECT_EQ(f.lanes[0].marks[0].label, "OOM (recorded)");
    EXPECT_NEAR(f.lanes[0].marks[0].x, 6.0, 0.01);
    const TimelineFrame g = computeFrame(*t, range, int(range.length()), content);
    ASSERT_TRUE(g.lanes[0].capacity);
    EXPECT_EQ(*g.lanes[0].capacity, double(3 << 20));
    EXPECT_EQ(g.lanes[0].capacityLabel, "capacity 3.00 MiB");
    EXPECT_EQ(g.lanes[0].maxValue, double(3 << 20)); // above the 2 MiB reserved: the line stays in view
    ASSERT_EQ(g.lanes[0].marks.size(), 2u);
    EXPECT_EQ(g.lanes[0].marks[1].label, "OOM (pytorch)");
    EXPECT_EQ(g.rows.size(), 0u);
}

TEST(TimelineLanes, SnapshotWithoutTimestampsGetsAnEventAxis)
{
    auto t = load(GPUMEM_SOURCE_DIR "/tests/data/snapshot/viewer_no_timestamps.json");
    ASSERT_TRUE(eventIndexAxis(t->trace));
    EXPECT_FALSE(eventIndexAxis(load(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl")->trace));
    TimeAxis axis({ 0, 1000 }, 1000); // 1 ns per px; entry i at i + 1 ns
    axis.setEventIndex(true);
    const auto ticks = axis.ticks();
    ASSERT_GE(ticks.size(), 2u);
    EXPECT_EQ(ticks[0].label, "event 0");
    EXPECT_EQ(ticks[0].time, 1);
    EXPECT_EQ(ticks[1].label, "event 100");
    EXPECT_EQ(axis.label(7), "event 6"); // the OOM entry
}
