// The viewer's Ranks page on the generated 8-rank job (bench/job_generator.h from traces/mlp_train.jsonl): one
// row per rank with `gpumem ranks`' cells, and a double click asks to open that rank's trace.
#include "bench/job_generator.h"
#include "gui/views/ranks_page.h"
#include "importers/importer_registry.h"

#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTableView>

#include <filesystem>
#include <unistd.h>

using namespace gpumem;

TEST(RanksPage, ShowsOneRowPerRankAndOpensTheRankPicked)
{
    const auto dir = std::filesystem::temp_directory_path() / ("gpumem-ranks-page-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    bench::RankJobGenerator job(loadTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl"), {});
    const auto paths = job.write(dir.string(), "gmt");

    gui::RanksPage page;
    QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy ready(&page, &gui::RanksPage::ready);
    page.load({ QString::fromStdString(dir.string()) });
    ASSERT_TRUE(ready.wait(60000));
    ASSERT_TRUE(ready.front().front().toBool()) << page.statusText().toStdString();
    const auto* m = page.model();
    ASSERT_EQ(m->rowCount(), 8);
    EXPECT_EQ(m->headerData(0, Qt::Horizontal).toString(), "rank");
    EXPECT_EQ(m->headerData(m->columnCount() - 1, Qt::Horizontal).toString(), "trace");
    EXPECT_EQ(m->data(m->index(7, 0)).toString(), "7 *L");
    EXPECT_EQ(m->data(m->index(4, 0)).toString(), "4 *");
    EXPECT_EQ(m->data(m->index(2, 0)).toString(), "2");
    EXPECT_TRUE(page.statusText().startsWith("rank 7 peaks highest")) << page.statusText().toStdString();
    QSignalSpy open(&page, &gui::RanksPage::openRank);
    emit page.table()->activated(m->index(7, 3));
    ASSERT_EQ(open.size(), 1);
    EXPECT_EQ(open.front().front().toString().toStdString(), paths[7]);

    // A folder without traces says so instead of a table.
    const auto empty = dir / "empty";
    std::filesystem::create_directories(empty);
    page.load({ QString::fromStdString(empty.string()) });
    ASSERT_TRUE(ready.wait(60000));
    EXPECT_FALSE(ready.back().front().toBool());
    EXPECT_EQ(m->rowCount(), 0);
    EXPECT_TRUE(page.statusText().contains("no traces in this folder")) << page.statusText().toStdString();
    std::filesystem::remove_all(dir);
}
