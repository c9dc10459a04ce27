#pragma once
// A damaged .gmt for the CLI tests: tests/data/tiny_alloc_free.jsonl (10 events) written in MEMV chunks of
// 4, 4 and 2 with one byte of the second chunk's payload flipped (its CRC then fails: a corrupt_chunk, 4
// events kept and 6 lost), and the chunk walk that finds it.
#include "cli_runner.h"

#include "core/gmt_format.h"
#include "core/jsonl_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::test {

inline std::uint32_t le32(const std::string& b, std::size_t at)
{
    std::uint32_t v = 0;
    for (int k = 3; k >= 0; --k)
        v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(k)]);
    return v;
}

struct Chunk {
    std::string type;
    std::size_t offset = 0;
};

// The chunks after the header (docs/trace-format.md §2–§3: 16 fixed bytes, the metadata, its checksum;
// then type, length, records, checksum and the payload).
inline std::vector<Chunk> chunksOf(const std::string& b)
{
    std::vector<Chunk> chunks;
    for (std::size_t at = 16 + le32(b, 12) + 4; at + 16 <= b.size(); at += 16 + le32(b, at + 4))
        chunks.push_back({ b.substr(at, 4), at });
    return chunks;
}

// The damaged tiny_alloc_free at `damaged`; returns the offsets of the damaged chunk and of the end chunk
// ({0, 0}, with a test failure, where the file is not laid out as expected).
inline std::pair<std::size_t, std::size_t> writeDamagedTiny(const std::string& damaged)
{
    writeGmt(readJsonl(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl"), damaged, 4);
    std::string bytes = slurp(damaged);
    const auto chunks = chunksOf(bytes);
    EXPECT_EQ(chunks.size(), 7u); // STRS DEVS STRM MEMV MEMV MEMV END
    if (chunks.size() != 7u || chunks[4].type != "MEMV" || chunks[6].type != "END ")
        return { 0, 0 };
    const std::size_t memv = chunks[4].offset, end = chunks[6].offset;
    bytes[memv + 16 + 2] ^= 0x10;
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
    return { memv, end };
}

} // namespace gpumem::test
