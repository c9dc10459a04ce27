// mpi::ProcessGroup: the threads path (always), and under `mpirun -np 3` (ctest test
// mpi.ProcessGroupUnderMpirun, label mpi) the MPI path, with the same assertions where they hold for
// any process count: results in item order, every item once, the lowest failing item's error on every
// process.
#include "mpi/process_group.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <set>
#include <string>
#include <vector>

namespace {
using gpumem::mpi::Distribution;
using gpumem::mpi::GatherTo;
using gpumem::mpi::MapOptions;
using gpumem::mpi::processGroup;

std::string square(std::size_t i) { return std::to_string(i * i) + (i % 3 ? std::string(i, 'x') : std::string()); }

std::vector<std::string> expected(std::size_t count)
{
    std::vector<std::string> v;
    for (std::size_t i = 0; i < count; ++i)
        v.push_back(square(i));
    return v;
}

TEST(ProcessGroup, ReturnsEveryResultInItemOrderForBothDistributions)
{
    auto& g = processGroup();
    for (Distribution d : { Distribution::RoundRobin, Distribution::Block })
        for (std::size_t count : { 0u, 1u, 2u, 7u, 100u }) {
            MapOptions o;
            o.distribution = d;
            o.jobs = 3;
            const auto got = g.mapGather(count, square, o);
            if (g.isRoot()) {
                EXPECT_EQ(got, expected(count)) << "count " << count;
            } else {
                EXPECT_TRUE(got.empty());
            }
        }
}

TEST(ProcessGroup, GatherToAllGivesEveryProcessTheResults)
{
    MapOptions o;
    o.to = GatherTo::All;
    EXPECT_EQ(processGroup().mapGather(11, square, o), expected(11));
}

TEST(ProcessGroup, RunsEachOfItsItemsOnceOnItsOwnerOnly)
{
    auto& g = processGroup();
    std::vector<std::atomic<int>> runs(50);
    MapOptions o;
    o.distribution = Distribution::Block;
    o.jobs = 4;
    o.to = GatherTo::All;
    const auto owners = g.mapGather(50, [&](std::size_t i) {
        ++runs[i];
        return std::to_string(g.rank());
    }, o);
    for (std::size_t i = 0; i < 50; ++i) {
        const bool mine = g.ownerOf(i, 50, Distribution::Block) == g.rank();
        EXPECT_EQ(runs[i].load(), mine ? 1 : 0) << "item " << i;
        EXPECT_EQ(owners[i], std::to_string(g.ownerOf(i, 50, Distribution::Block)));
    }
}

TEST(ProcessGroup, BlockDistributionGivesContiguousNearlyEqualShares)
{
    auto& g = processGroup();
    std::vector<std::size_t> share(std::size_t(g.size()), 0);
    int last = 0;
    for (std::size_t i = 0; i < 10; ++i) {
        const int r = g.ownerOf(i, 10, Distribution::Block);
        EXPECT_GE(r, last); // non-decreasing: neighbours stay together
        last = r;
        ++share[std::size_t(r)];
    }
    for (auto s : share)
        EXPECT_LE(s, 10 / share.size() + 1);
    EXPECT_EQ(g.ownerOf(7, 10, Distribution::RoundRobin), 7 % g.size());
}

TEST(ProcessGroup, ThrowsTheLowestFailingItemsErrorOnEveryProcess)
{
    auto& g = processGroup();
    // Items 5 and 4 fail (on different processes under mpirun -np 3, round robin); 4 is reported.
    auto work = [](std::size_t i) -> std::string {
        if (i == 5)
            throw gpumem::Error("item five failed");
        if (i == 4)
            throw gpumem::UsageError("item four: bad argument");
        return square(i);
    };
    try {
        g.mapGather(9, work, {});
        FAIL() << "no exception";
    } catch (const gpumem::UsageError& e) {
        EXPECT_STREQ(e.what(), "item four: bad argument");
    }
    EXPECT_TRUE(g.lastFailureWasShared());
    EXPECT_THROW(g.mapGather(3, [](std::size_t) -> std::string { throw std::bad_alloc(); }, {}), std::bad_alloc);
    EXPECT_EQ(g.mapGather(3, square, {}).size(), g.isRoot() ? 3u : 0u); // the group still works afterwards
    EXPECT_FALSE(g.lastFailureWasShared());
}

TEST(ProcessGroup, KeepsResultsThatHoldZeroBytes)
{
    MapOptions o;
    o.to = GatherTo::All;
    const auto got = processGroup().mapGather(4, [](std::size_t i) { return i == 2 ? std::string("\0a", 2) : std::string(); }, o);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[2], std::string("\0a", 2));
    EXPECT_EQ(got[3], "");
}

TEST(ProcessGroup, IsOneProcessWithoutALauncher)
{
    if (gpumem::mpi::readLaunchEnvironment().launched)
        GTEST_SKIP() << "started by an MPI launcher";
    EXPECT_EQ(processGroup().size(), 1);
    EXPECT_FALSE(processGroup().usesMpi());
    EXPECT_GE(processGroup().defaultJobs(), 1u);
}

TEST(ProcessGroup, RefusesSeveralSrunTasksWithoutAnMpiPlugin)
{
    if (gpumem::mpi::readLaunchEnvironment().launched)
        GTEST_SKIP() << "started by an MPI launcher";
    // What `srun -n 4 --mpi=none` sets (and none of the PMI variables).
    ::setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    int argc = 1;
    char name[] = "test_mpi";
    char* args[] = { name, nullptr };
    char** argv = args;
    try {
        gpumem::mpi::MpiSession session(argc, argv);
        ADD_FAILURE() << "no error";
    } catch (const gpumem::Error& e) {
        EXPECT_NE(std::string(e.what()).find("srun --mpi=pmix"), std::string::npos) << e.what();
    }
    ::setenv("SLURM_STEP_NUM_TASKS", "1", 1); // one task: nothing to spread, no error
    EXPECT_NO_THROW({ gpumem::mpi::MpiSession one(argc, argv); });
    ::unsetenv("SLURM_STEP_NUM_TASKS");
}

TEST(ProcessGroup, JoinsTheWholeJobUnderALauncher)
{
    const auto env = gpumem::mpi::readLaunchEnvironment();
    if (!env.launched || !gpumem::mpi::builtWithMpi())
        GTEST_SKIP() << "not started by mpirun (the ctest test mpi.ProcessGroupUnderMpirun is)";
    EXPECT_TRUE(processGroup().usesMpi());
    if (env.size) {
        EXPECT_EQ(processGroup().size(), env.size);
    }
    EXPECT_LT(processGroup().rank(), processGroup().size());
}
} // namespace

int main(int argc, char** argv)
{
    gpumem::mpi::MpiSession session(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    const int rc = RUN_ALL_TESTS();
    // Any failing process fails the job (mpirun exits non-zero when one process does).
    return rc;
}
