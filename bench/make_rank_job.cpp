// make_rank_job — writes the traces of a synthetic distributed job (bench/job_generator.h) for `gpumem ranks`
// tests and the scale benchmarks:
//   make_rank_job [--ranks N] [--seed S] [--format gmt|jsonl] [--leak-rank R|none] [--extra-buffer-rank R|none]
//                 BASE_TRACE OUT_DIR
// Prints one line per rank file and a last line naming the leak and extra-buffer ranks.
#include "bench/job_generator.h"
#include "core/error.h"
#include "importers/importer_registry.h"

#include <charconv>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

namespace {
std::size_t number(std::string_view option, std::string_view text, bool allowNone)
{
    if (allowNone && text == "none")
        return gpumem::bench::kNoRank;
    std::size_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
        throw gpumem::UsageError(std::string(option) + " '" + std::string(text) + "': give a whole number" + (allowNone ? " or none" : ""));
    return v;
}
} // namespace

int main(int argc, char** argv)
{
    try {
        gpumem::bench::RankJobOptions options;
        std::string format = "gmt";
        std::vector<std::string> positional;
        for (int i = 1; i < argc; ++i) {
            const std::string_view a = argv[i];
            auto value = [&]() -> std::string_view {
                if (i + 1 >= argc)
                    throw gpumem::UsageError(std::string(a) + " needs a value");
                return argv[++i];
            };
            if (a == "--ranks")
                options.ranks = number(a, value(), false);
            else if (a == "--seed")
                options.seed = number(a, value(), false);
            else if (a == "--format")
                format = std::string(value());
            else if (a == "--leak-rank")
                options.leakRank = number(a, value(), true);
            else if (a == "--extra-buffer-rank")
                options.extraBufferRank = number(a, value(), true);
            else if (a == "-h" || a == "--help") {
                std::cout << "usage: make_rank_job [--ranks N] [--seed S] [--format gmt|jsonl] [--leak-rank R|none]\n"
                             "                     [--extra-buffer-rank R|none] BASE_TRACE OUT_DIR\n";
                return 0;
            } else if (a.starts_with("-"))
                throw gpumem::UsageError("unknown option " + std::string(a));
            else
                positional.emplace_back(a);
        }
        if (positional.size() != 2)
            throw gpumem::UsageError("give the base trace and the output folder (see --help)");
        gpumem::bench::RankJobGenerator job(gpumem::loadTrace(positional[0]), options);
        for (const auto& path : job.write(positional[1], format))
            std::cout << path << '\n';
        auto name = [](std::size_t r) { return r == gpumem::bench::kNoRank ? std::string("none") : std::to_string(r); };
        std::cout << "leak rank " << name(job.leakRank()) << ", extra-buffer rank " << name(job.extraBufferRank()) << '\n';
        return 0;
    } catch (const gpumem::UsageError& e) {
        std::cerr << "make_rank_job: " << e.what() << '\n';
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "make_rank_job: " << e.what() << '\n';
        return 1;
    }
}
