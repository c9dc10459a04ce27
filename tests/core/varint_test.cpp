// The bulk varint readers of core/detail/varint.h (readVarints, readVarintBlocks, readVarintBlocksPext where
// the CPU has BMI2, readVarintBlocksAvx512 where it has AVX-512 VBMI2, varintsExactly) against the reference, n calls of readVarint: the same values, the same
// end position, the same verdict on malformed input.
#include "core/detail/varint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace gpumem::detail {
namespace {

    struct Reference {
        std::vector<std::uint64_t> values;
        bool bad = false;
        std::size_t consumed = 0;
    };

    // n calls of readVarint, as decodeColumn made them before readVarints.
    Reference reference(const std::string& bytes, std::size_t n)
    {
        Reference r;
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
        const auto* begin = p;
        const auto* end = p + bytes.size();
        for (std::size_t i = 0; i < n && !r.bad; ++i) {
            const std::uint64_t v = readVarint(p, end, r.bad);
            if (!r.bad)
                r.values.push_back(v);
        }
        r.consumed = static_cast<std::size_t>(p - begin);
        return r;
    }

    void expectSame(const std::string& bytes, std::size_t n, const std::string& what)
    {
        const Reference ref = reference(bytes, n);
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
        const auto* begin = p;
        bool bad = false;
        std::vector<std::uint64_t> got;
        readVarints(p, p + bytes.size(), n, bad, [&](std::uint64_t v) { got.push_back(v); });
        EXPECT_EQ(bad, ref.bad) << what;
        EXPECT_EQ(got, ref.values) << what;
        EXPECT_EQ(static_cast<std::size_t>(p - begin), ref.consumed) << what;
        // A block reader's values put together, as (verdict, values, bytes consumed).
        auto blocksOf = [&](auto reader) {
            const auto* q = reinterpret_cast<const unsigned char*>(bytes.data());
            bool badBlocks = false;
            std::vector<std::uint64_t> values;
            reader(q, q + bytes.size(), n, badBlocks, [&](const std::uint64_t* v, std::size_t k) {
                EXPECT_LE(k, kVarintBlock);
                values.insert(values.end(), v, v + k);
            });
            return std::tuple(badBlocks, values, static_cast<std::size_t>(q - begin));
        };
        const auto expected = std::tuple(ref.bad, ref.values, ref.consumed);
        EXPECT_EQ(blocksOf([](auto&&... a) { readVarintBlocks(a...); }), expected) << what << " (blocks)";
#ifdef GPUMEM_HAVE_PEXT_VARINTS
        if (__builtin_cpu_supports("bmi2")) { // fast or not: the answers must be the same
            EXPECT_EQ(blocksOf([](auto&&... a) { readVarintBlocksPext(a...); }), expected) << what << " (pext)";
        }
#endif
#ifdef GPUMEM_HAVE_AVX512_VARINTS
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi")
            && __builtin_cpu_supports("avx512vbmi2")) {
            EXPECT_EQ(blocksOf([](auto&&... a) { readVarintBlocksAvx512(a...); }), expected) << what << " (avx-512)";
        }
#endif
        const bool exact = !ref.bad && ref.consumed == bytes.size();
        const auto* q = reinterpret_cast<const unsigned char*>(bytes.data());
        EXPECT_EQ(varintsExactly(q, q + bytes.size(), n), exact) << what;
    }

    std::string encode(const std::vector<std::uint64_t>& values)
    {
        std::string out;
        for (std::uint64_t v : values) {
            do {
                unsigned char b = v & 0x7f;
                v >>= 7;
                out.push_back(static_cast<char>(v ? b | 0x80 : b));
            } while (v);
        }
        return out;
    }

    TEST(Varints, ValuesOfEveryLengthReadAsOneAtATime)
    {
        std::mt19937_64 rng(7);
        for (int round = 0; round < 200; ++round) {
            std::vector<std::uint64_t> values(1 + rng() % 300);
            for (auto& v : values) // lengths 1 to 10 bytes, mixed
                v = rng() >> (rng() % 64);
            const std::string bytes = encode(values);
            expectSame(bytes, values.size(), "round " + std::to_string(round));
            EXPECT_EQ(reference(bytes, values.size()).values, values);
            // fewer values asked for than there are: stops after n, the rest is not consumed
            expectSame(bytes, values.size() / 2, "half of round " + std::to_string(round));
            // more asked for than there are: the end cuts the last one
            expectSame(bytes, values.size() + 1, "one more in round " + std::to_string(round));
        }
    }

    TEST(Varints, MalformedAndCutInputsGetTheSameVerdict)
    {
        std::mt19937_64 rng(11);
        for (int round = 0; round < 2000; ++round) {
            std::string bytes(rng() % 200, '\0');
            for (auto& c : bytes) { // mostly continuation bytes, so long runs and 10-byte varints occur
                const auto r = rng();
                c = static_cast<char>(r % 4 == 0 ? r % 2 : (r % 5 == 0 ? (r >> 8) % 128 : 0x80 | ((r >> 8) % 128)));
            }
            for (std::size_t n : { std::size_t(0), std::size_t(1), bytes.size() / 9, bytes.size() / 4, bytes.size() / 2, bytes.size() })
                expectSame(bytes, n, "round " + std::to_string(round) + " n " + std::to_string(n));
        }
    }

    TEST(Varints, TenByteVarintsAndRunsAcrossWordBoundaries)
    {
        // 2^63 needs 10 bytes whose last is 1 (legal); a last byte of 2 overflows (malformed); 11 bytes are
        // malformed. Each placed at every offset of a 72-byte lead of one-byte values, so the runs of
        // continuation bytes cross the 8-byte words and the 64-byte blocks at every position.
        const std::string legal = encode({ std::uint64_t(1) << 63 });
        ASSERT_EQ(legal.size(), 10u);
        std::string overflow = legal;
        overflow.back() = 2;
        std::string eleven = legal;
        eleven.back() = static_cast<char>(0x81);
        eleven.push_back(0);
        for (const auto& odd : { legal, overflow, eleven, encode({ std::uint64_t(1) << 56 }) })
            for (std::size_t lead = 0; lead < 80; ++lead) {
                const std::string bytes = std::string(lead, '\x05') + odd + std::string(70, '\x03');
                for (std::size_t n : { lead, lead + 1, lead + 71, lead + 72 })
                    expectSame(bytes, n, "lead " + std::to_string(lead) + " n " + std::to_string(n) + " length " + std::to_string(odd.size()));
            }
        const std::string longRun = std::string(100, '\x05') + std::string(70, '\x80') + '\x01';
        expectSame(longRun, 101, "a run of 70 continuation bytes");
    }

} // namespace
} // namespace gpumem::detail
