#include "gui/models/time_axis.h"

#include <gtest/gtest.h>

using namespace gpumem;
using namespace gpumem::gui;

TEST(TimeAxis, MapsTimesToPixelsAndBack)
{
    TimeAxis axis({ 1000, 1'001'000 }, 1000); // 1 ms over 1000 px: 1 µs per pixel
    EXPECT_DOUBLE_EQ(axis.nsPerPixel(), 1000.0);
    EXPECT_DOUBLE_EQ(axis.toX(1000), 0.0);
    EXPECT_DOUBLE_EQ(axis.toX(501'000), 500.0);
    EXPECT_EQ(axis.toTime(250.0), 251'000);
}

TEST(TimeAxis, ZoomKeepsTheAnchorTimeUnderTheCursor)
{
    TimeAxis axis({ 0, 1'000'000 }, 1000);
    TimeNs before = axis.toTime(300);
    axis.zoom(4.0, 300);
    EXPECT_EQ(axis.visible().length(), 250'000);
    EXPECT_EQ(axis.toTime(300), before);
    axis.zoom(0.25, 300);
    EXPECT_EQ(axis.visible(), (TimeRange { 0, 1'000'000 }));
}

TEST(TimeAxis, PanAndZoomStayInsideTheFullRange)
{
    TimeAxis axis({ 0, 1'000'000 }, 100);
    axis.zoom(10, 0); // [0, 100 µs)
    axis.pan(-50);
    EXPECT_EQ(axis.visible().start, 0);
    axis.pan(1e9);
    EXPECT_EQ(axis.visible().end, 1'000'000);
    EXPECT_EQ(axis.visible().length(), 100'000);
    axis.zoom(1e12, 50); // cannot zoom below the minimum span
    EXPECT_EQ(axis.visible().length(), TimeAxis::kMinSpanNs);
    axis.zoom(1e-12, 50);
    EXPECT_EQ(axis.visible(), axis.full());
}

TEST(TimeAxis, TicksFollowOneTwoFiveStepsFromTheTraceStart)
{
    TimeAxis axis({ 5'000'000, 105'000'000 }, 1000); // 100 ms over 1000 px
    auto ticks = axis.ticks(80); // ≥ 8 ms apart → 10 ms steps
    ASSERT_EQ(ticks.size(), 11u);
    EXPECT_EQ(ticks[0].label, "0 s");
    EXPECT_EQ(ticks[1].label, "10 ms");
    EXPECT_DOUBLE_EQ(ticks[1].x, 100.0);
    EXPECT_EQ(ticks[10].time, 105'000'000);
    axis.setVisible({ 5'000'000 + 12'345'000, 5'000'000 + 13'345'000 }); // 1 ms visible
    auto fine = axis.ticks(80); // ≥ 80 µs apart → 100 µs steps
    ASSERT_FALSE(fine.empty());
    EXPECT_EQ(fine[0].label, "12.4 ms");
    EXPECT_EQ(fine[1].time - fine[0].time, 100'000);
}

TEST(TimeAxis, RubberBandGivesTheRangeInEitherDirection)
{
    TimeAxis axis({ 0, 1'000'000 }, 1000);
    EXPECT_EQ(axis.rangeBetween(700, 200), (TimeRange { 200'000, 700'000 }));
}

TEST(FormatDuration, UsesThreeSignificantDigits)
{
    EXPECT_EQ(formatDuration(0), "0 s");
    EXPECT_EQ(formatDuration(250), "250 ns");
    EXPECT_EQ(formatDuration(12'500'000), "12.5 ms");
    EXPECT_EQ(formatDuration(3'210'000'000), "3.21 s");
    EXPECT_EQ(formatDuration(1'500), "1.5 µs");
}

TEST(ZoomHistory, GoesBackAndForwardAndDropsForwardOnPush)
{
    ZoomHistory h;
    h.push({ 0, 100 });
    h.push({ 10, 50 });
    h.push({ 20, 30 });
    EXPECT_EQ(h.back(), (TimeRange { 10, 50 }));
    EXPECT_EQ(h.back(), (TimeRange { 0, 100 }));
    EXPECT_FALSE(h.canBack());
    EXPECT_EQ(h.forward(), (TimeRange { 10, 50 }));
    h.push({ 40, 45 });
    EXPECT_FALSE(h.canForward());
    EXPECT_EQ(h.back(), (TimeRange { 10, 50 }));
}
