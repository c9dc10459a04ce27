/* The workload of bench/heaptrack_vs_gpumem.sh: PAIRS malloc/free pairs through a window of LIVE
 * blocks (each malloc frees the block allocated LIVE calls earlier, so addresses recur the way an
 * allocator's do), sizes 16 B .. 64 KiB from a fixed LCG (the same stream on every run).
 *
 * usage: malloc_free_stream PAIRS LIVE OUT.jsonl
 *
 * Run under heaptrack, it is heaptrack's input; it also writes the very same stream (the addresses
 * malloc returned, in call order) as a gpumem .jsonl trace (docs/trace-format.md), one event a line,
 * times 1 µs apart, so both tools analyse the same events. Exit status 2 on bad arguments, 1 when
 * the output cannot be written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s PAIRS LIVE OUT.jsonl\n", argv[0]);
        return 2;
    }
    const unsigned long long pairs = strtoull(argv[1], NULL, 10);
    const unsigned long live = strtoul(argv[2], NULL, 10);
    if (pairs == 0 || live == 0) {
        fprintf(stderr, "%s: PAIRS and LIVE must be positive\n", argv[0]);
        return 2;
    }
    FILE* out = fopen(argv[3], "w");
    if (!out) {
        perror(argv[3]);
        return 1;
    }
    void** slot = calloc(live, sizeof(void*));
    size_t* slotSize = calloc(live, sizeof(size_t));
    if (!slot || !slotSize)
        return 1;
    fprintf(out, "{\"format\":\"gpumem-jsonl\",\"version\":1,\"metadata\":{\"source_format\":\"synthetic\","
                 "\"tool\":\"bench/malloc_free_stream.c\",\"description\":\"%llu malloc/free pairs, %lu live\"}}\n",
        pairs, live);
    fputs("{\"type\":\"device\",\"id\":0,\"kind\":\"cuda\",\"ordinal\":0}\n", out);
    fputs("{\"type\":\"stream\",\"id\":0,\"device\":0,\"handle\":0}\n", out);
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    uint64_t t = 1700000000000000000ULL;
    for (unsigned long long i = 0; i < pairs + live; ++i) {
        const unsigned long s = (unsigned long)(i % live);
        if (slot[s]) {
            fprintf(out, "{\"type\":\"mem\",\"t\":%llu,\"kind\":\"free\",\"addr\":%llu,\"size\":%zu}\n",
                (unsigned long long)(t += 1000), (unsigned long long)(uintptr_t)slot[s], slotSize[s]);
            free(slot[s]);
            slot[s] = NULL;
        }
        if (i >= pairs)
            continue;
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        const size_t size = 16 + (size_t)((rng >> 33) % 65520);
        slot[s] = malloc(size);
        if (!slot[s])
            return 1;
        slotSize[s] = size;
        fprintf(out, "{\"type\":\"mem\",\"t\":%llu,\"kind\":\"alloc\",\"addr\":%llu,\"size\":%zu,\"requested\":%zu}\n",
            (unsigned long long)(t += 1000), (unsigned long long)(uintptr_t)slot[s], size, size);
    }
    free(slot);
    free(slotSize);
    return fclose(out) == 0 ? 0 : 1;
}
