// The open-addressing map Trace pairing keeps its live blocks in (core/detail/address_map.h),
// against std::unordered_map on the same operations.
#include "core/detail/address_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

using gpumem::detail::AddressMap;

TEST(AddressMap, ExchangeReturnsTheValueItReplaces)
{
    AddressMap m;
    EXPECT_EQ(m.find(0x7f0000000000), AddressMap::kNone);
    EXPECT_EQ(m.exchange(0x7f0000000000, 3), AddressMap::kNone);
    EXPECT_EQ(m.exchange(0x7f0000000000, 7), 3u);
    EXPECT_EQ(m.find(0x7f0000000000), 7u);
    EXPECT_EQ(m.size(), 1u);
    EXPECT_EQ(m.take(0x7f0000000000), 7u);
    EXPECT_EQ(m.take(0x7f0000000000), AddressMap::kNone);
    EXPECT_EQ(m.size(), 0u);
    // Key 0 is an ordinary key (address 0 on device 0).
    EXPECT_EQ(m.exchange(0, 1), AddressMap::kNone);
    EXPECT_EQ(m.find(0), 1u);
}

TEST(AddressMap, KeepsATagBesideEachValueAndReplacesItWithTheValue)
{
    AddressMap m;
    EXPECT_EQ(m.exchange(0x7f0000000000, 3, 1024), AddressMap::kNone);
    EXPECT_EQ(m.exchange(0x7f0000000200, 4, 512), AddressMap::kNone);
    EXPECT_EQ(m.exchange(0x7f0000000000, 5, 2048), 3u);
    const AddressMap::Entry e = m.takeEntry(0x7f0000000000);
    EXPECT_EQ(e.value, 5u);
    EXPECT_EQ(e.tag, 2048u);
    EXPECT_EQ(m.takeEntry(0x7f0000000000).value, AddressMap::kNone);
    EXPECT_EQ(m.takeEntry(0x7f0000000200).tag, 512u);
    EXPECT_EQ(m.size(), 0u);
}

// Addresses that recur through a small window of live blocks, as an allocator hands them out, with
// enough of them to grow the table and wrap probe runs around its end: every find, exchange and take
// answers as std::unordered_map does, so erasing never loses an entry further along its run.
TEST(AddressMap, AnswersAsUnorderedMapOnARecurringAddressStream)
{
    std::mt19937_64 rng(22);
    AddressMap m;
    std::unordered_map<std::uint64_t, std::uint32_t> reference;
    for (std::uint32_t step = 0; step < 200000; ++step) {
        // 512-byte aligned addresses in a 4 MiB range on two devices (device in bit 52, as pairing folds it).
        const std::uint64_t key = (std::uint64_t(rng() & 1) << 52) ^ (0x7f3a00000000 + (rng() % 8192) * 512);
        const auto op = rng() % 3;
        if (op == 0) {
            auto it = reference.find(key);
            const std::uint32_t expected = it == reference.end() ? AddressMap::kNone : it->second;
            ASSERT_EQ(m.exchange(key, step), expected) << "step " << step;
            reference[key] = step;
        } else if (op == 1) {
            auto it = reference.find(key);
            const std::uint32_t expected = it == reference.end() ? AddressMap::kNone : it->second;
            ASSERT_EQ(m.take(key), expected) << "step " << step;
            if (it != reference.end())
                reference.erase(it);
        } else {
            auto it = reference.find(key);
            ASSERT_EQ(m.find(key), it == reference.end() ? AddressMap::kNone : it->second) << "step " << step;
        }
        ASSERT_EQ(m.size(), reference.size());
    }
    for (const auto& [key, value] : reference)
        EXPECT_EQ(m.find(key), value);
}
