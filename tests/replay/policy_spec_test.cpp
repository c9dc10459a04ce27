#include "replay_test_support.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
std::string usageError(const std::string& spec)
{
    try {
        validatePolicySpec(parsePolicySpec(spec));
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}
PyTorchConfig config(const std::string& spec) { return pytorchConfigFor(parsePolicySpec(spec)); }
}

TEST(PolicySpec, ParsesNameVersionAndPytorchAllocConfSyntax)
{
    auto s = parsePolicySpec(
        "pytorch@2.0:expandable_segments:True, max_split_size_mb:128,roundup_power2_divisions:[256:1,>:8]");
    EXPECT_EQ(s.policy, "pytorch");
    EXPECT_EQ(s.version, "2.0");
    ASSERT_EQ(s.options.size(), 3u);
    EXPECT_EQ(s.options[0], ConfOption("expandable_segments", "True"));
    EXPECT_EQ(s.options[1], ConfOption("max_split_size_mb", "128"));
    EXPECT_EQ(s.options[2], ConfOption("roundup_power2_divisions", "[256:1,>:8]"));
    EXPECT_TRUE(parsePolicySpec("direct").options.empty());
}

TEST(PolicySpec, BadSpecsNameTheValidChoices)
{
    EXPECT_NE(usageError("tcmalloc").find("valid policies: pytorch, direct, ideal"), std::string::npos);
    EXPECT_NE(usageError("pytorch:max_split:128").find("valid options: backend, max_split_size_mb"), std::string::npos);
    EXPECT_NE(usageError("pytorch:expandable_segments:yes").find("True or False"), std::string::npos);
    EXPECT_NE(usageError("pytorch@1.9").find("valid versions: main (default), 1.11, 2.0, 2.5, 2.10"), std::string::npos);
    EXPECT_NE(usageError("pytorch:max_split_size_mb:10").find(">= large_segment_size_mb (20)"), std::string::npos);
    EXPECT_NE(usageError("pytorch@2.0:max_split_size_mb:20").find("greater than 20"), std::string::npos);
    EXPECT_NE(usageError("pytorch@2.0:expandable_segments:True").find("unknown pytorch@2.0 option"), std::string::npos);
    EXPECT_NE(usageError("pytorch:garbage_collection_threshold:1.0").find("between 0 and 1"), std::string::npos);
    EXPECT_NE(usageError("pytorch:roundup_power2_divisions:3").find("power of two"), std::string::npos);
    EXPECT_NE(usageError("pytorch:roundup_power2_divisions:[100:4]").find("power of two"), std::string::npos);
    EXPECT_NE(usageError("pytorch:large_segment_size_mb:10").find("greater than 10"), std::string::npos);
    // backend:cudaMallocAsync is accepted since issue 19 (allocator_versions_test.cpp); others are not.
    EXPECT_NE(usageError("pytorch:backend:bogus").find("valid values: native, cudaMallocAsync"), std::string::npos);
    EXPECT_NE(usageError("direct:granularity:4").find("valid options: alignment"), std::string::npos);
    EXPECT_NE(usageError("ideal:alignment:3").find("power of two"), std::string::npos);
    EXPECT_NE(usageError(":x:1").find("no policy name"), std::string::npos);
    EXPECT_NE(usageError("pytorch:roundup_power2_divisions:[64:8").find("unbalanced"), std::string::npos);
    EXPECT_EQ(usageError("pytorch:release_lock_on_cudamalloc:True,pinned_num_register_threads:8"), "");
}

TEST(PyTorchConfig, RoundupListFormMatchesUpstreamTestValues)
{
    // c10/test/core/AllocatorConfig_test.cpp expectations (allocators.md §1.3).
    auto a = config("pytorch:roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]");
    const std::vector<std::pair<Bytes, std::uint64_t>> ea
        = { { 32, 8 }, { 64, 8 }, { 128, 2 }, { 256, 4 }, { 512, 2 }, { 1024, 4 }, { 2048, 1 }, { 4096, 1 } };
    for (auto [mb, d] : ea)
        EXPECT_EQ(a.divisionsFor(mb * MiB), d) << mb << " MiB";
    auto b = config("pytorch:roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]");
    const std::vector<std::pair<Bytes, std::uint64_t>> eb
        = { { 64, 8 }, { 128, 8 }, { 256, 16 }, { 512, 1 }, { 1024, 0 }, { 2048, 8 }, { 4096, 2 } };
    for (auto [mb, d] : eb)
        EXPECT_EQ(b.divisionsFor(mb * MiB), d) << mb << " MiB";
    // §1.3 consequence: one interval higher than the docs' prose.
    auto c = config("pytorch:roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    EXPECT_EQ(c.divisionsFor(300 * MiB), 1u);
    EXPECT_EQ(c.divisionsFor(600 * MiB), 2u);
    EXPECT_EQ(c.divisionsFor(1500 * MiB), 4u);
    EXPECT_EQ(c.divisionsFor(3000 * MiB), 8u);
}

TEST(PyTorchConfig, Version20RulesDifferWhereSection114Says)
{
    // `>` fills from the last listed index inclusive in 2.0.
    auto v20 = config("pytorch@2.0:roundup_power2_divisions:[64:8,128:2,>:1]");
    EXPECT_EQ(v20.divisionsFor(128 * MiB), 1u);
    EXPECT_EQ(config("pytorch:roundup_power2_divisions:[64:8,128:2,>:1]").divisionsFor(128 * MiB), 2u);
    // divisions 1 leaves sizes above 512 B unrounded in 2.0; newest rounds to 512.
    EXPECT_EQ(config("pytorch@2.0:roundup_power2_divisions:1").roundSize(1000), 1000u);
    EXPECT_EQ(config("pytorch:roundup_power2_divisions:1").roundSize(1000), 1024u);
    EXPECT_EQ(config("pytorch@2.0:roundup_power2_divisions:1").roundSize(100), 512u);
    // Same power-2 rounding otherwise.
    EXPECT_EQ(config("pytorch@2.0:roundup_power2_divisions:4").roundSize(100 * MiB), 112 * MiB);
}

TEST(PyTorchConfig, SegmentSizesFollowLargeSegmentSize)
{
    auto d = config("pytorch");
    EXPECT_EQ(d.allocationSize(512), 2 * MiB);
    EXPECT_EQ(d.allocationSize(MiB), 2 * MiB);
    EXPECT_EQ(d.allocationSize(MiB + 512), 20 * MiB);
    EXPECT_EQ(d.allocationSize(10 * MiB - 512), 20 * MiB);
    EXPECT_EQ(d.allocationSize(10 * MiB), 10 * MiB);
    EXPECT_EQ(d.allocationSize(11 * MiB), 12 * MiB);
    auto l = config("pytorch:large_segment_size_mb:64");
    EXPECT_EQ(l.allocationSize(3 * MiB), 64 * MiB);
    EXPECT_EQ(l.maxNonSplitRounding, 64 * MiB); // its default follows large_segment_size
    Rig r("pytorch:large_segment_size_mb:64,expandable_segments:True");
    r.alloc(3 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentMap), std::vector<Bytes>({ 64 * MiB })); // page size too
}

TEST(PyTorchConfig, RecordedSettingsAreUsedWhenTheSpecHasNoOptions)
{
    nlohmann::json settings = { { "PYTORCH_CUDA_ALLOC_CONF", "large_segment_size_mb:40" },
        { "max_split_size", 256 * MiB }, { "garbage_collection_threshold", 0.0 }, { "expandable_segments", false },
        { "roundup_power2_divisions", { { "1", 0 }, { "2", 4 }, { "4", 0 } } } };
    PolicyContext ctx { &settings };
    auto c = pytorchConfigFor(parsePolicySpec("pytorch"), ctx);
    EXPECT_EQ(c.maxSplitSize, 256 * MiB);
    EXPECT_EQ(c.largeSegmentSize, 40 * MiB);
    EXPECT_EQ(c.divisionsFor(3 * MiB), 4u);
    EXPECT_EQ(c.divisionsFor(5 * MiB), 0u);
    // Options given on the command line replace the recording.
    auto o = pytorchConfigFor(parsePolicySpec("pytorch:expandable_segments:True"), ctx);
    EXPECT_EQ(o.maxSplitSize, kUnlimited);
    EXPECT_TRUE(o.expandableSegments);
    nlohmann::json unlimited = { { "max_split_size", -1 } };
    EXPECT_EQ(pytorchConfigFor(parsePolicySpec("pytorch"), { &unlimited }).maxSplitSize, kUnlimited);
}

TEST(PyTorchConfig, NameEchoesTheEffectiveSettings)
{
    Rig r("pytorch:max_split_size_mb:128,expandable_segments:True");
    EXPECT_EQ(r.policy->name(), "pytorch:expandable_segments:True,max_split_size_mb:128");
    EXPECT_EQ(Rig("pytorch@2.0").policy->name(), "pytorch@2.0");
    EXPECT_EQ(Rig("ideal:alignment:1").policy->name(), "ideal:alignment:1");
}

TEST(CompactionSpec, WrapsAnInnerSpecWithBracketParameters)
{
    auto s = parsePolicySpec("compaction[every=1000, at=nccl:all_*]:pytorch:expandable_segments:True,max_split_size_mb:64");
    EXPECT_EQ(s.policy, "compaction");
    EXPECT_TRUE(s.options.empty());
    ASSERT_EQ(s.params.size(), 2u);
    EXPECT_EQ(s.params[0], ConfOption("every", "1000"));
    EXPECT_EQ(s.params[1], ConfOption("at", "nccl:all_*")); // ':' allowed inside the brackets
    ASSERT_TRUE(s.inner);
    EXPECT_EQ(s.inner->policy, "pytorch");
    EXPECT_EQ(s.inner->text, "pytorch:expandable_segments:True,max_split_size_mb:64");
    ASSERT_EQ(s.inner->options.size(), 2u);
    EXPECT_EQ(s.inner->options[1], ConfOption("max_split_size_mb", "64"));

    auto plain = parsePolicySpec("compaction:ideal:alignment:1");
    EXPECT_TRUE(plain.params.empty());
    EXPECT_EQ(plain.inner->policy, "ideal");
    EXPECT_EQ(plain.inner->options[0], ConfOption("alignment", "1"));
    // Other policies keep PyTorch's list syntax after the colon.
    EXPECT_EQ(parsePolicySpec("pytorch:roundup_power2_divisions:[64:8,>:2]").options[0].second, "[64:8,>:2]");

    EXPECT_EQ(Rig("compaction:pytorch").policy->name(), "compaction:pytorch");
    EXPECT_EQ(Rig("compaction[order=size,every=50]:ideal").policy->name(), "compaction[every=50,order=size]:ideal");
    EXPECT_EQ(Rig("compaction[at=Step*]:direct").policy->name(), "compaction[at=Step*]:direct");
    EXPECT_EQ(Rig("compaction[at=ProfilerStep*,every=9]:direct").policy->name(),
        "compaction[at=ProfilerStep*,every=9]:direct");
}

TEST(CompactionSpec, BadSpecsSayWhatToWrite)
{
    EXPECT_NE(usageError("compaction").find("wraps another policy"), std::string::npos);
    EXPECT_NE(usageError("compaction[every=10]").find("wraps another policy"), std::string::npos);
    EXPECT_NE(usageError("compaction[every=0]:pytorch").find("positive number"), std::string::npos);
    EXPECT_NE(usageError("compaction[every=x]:pytorch").find("positive number"), std::string::npos);
    EXPECT_NE(usageError("compaction[often=1]:pytorch").find("valid parameters: every, at, order"), std::string::npos);
    EXPECT_NE(usageError("compaction[order=random]:pytorch").find("valid values: address, size"), std::string::npos);
    EXPECT_NE(usageError("compaction[every]:pytorch").find("key=value"), std::string::npos);
    EXPECT_NE(usageError("compaction[every=1:pytorch").find("not closed"), std::string::npos);
    EXPECT_NE(usageError("compaction[every=1]x:pytorch").find("expected ':' after ']'"), std::string::npos);
    // Review finding: 'compaction:' × 10^4 + 'pytorch' grew to 6.6 GB before it was killed.
    EXPECT_NE(usageError("compaction:compaction[every=5]:pytorch").find("compaction cannot wrap compaction"),
        std::string::npos);
    std::string deep;
    for (int i = 0; i < 10000; ++i)
        deep += "compaction:";
    EXPECT_NE(usageError(deep + "pytorch").find("cannot wrap"), std::string::npos);
    EXPECT_NE(usageError("compaction:optimal").find("never needs to move"), std::string::npos);
    EXPECT_NE(usageError("compaction:tcmalloc").find("unknown policy 'tcmalloc'"), std::string::npos);
    EXPECT_NE(usageError("compaction:pytorch:max_split:1").find("unknown pytorch option"), std::string::npos);
    EXPECT_NE(usageError("pytorch[every=1]").find("takes no [...] parameters"), std::string::npos);
    EXPECT_EQ(usageError("compaction[every=9]:pytorch@2.0"), "");
}
