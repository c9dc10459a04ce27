#include "cli/out_of_memory.h"

#include "cli/whatif_options.h"

#include "core/message_quote.h"
#include "importers/importer_registry.h"

#include <algorithm>
#include <array>

namespace gpumem::cli {

bool streamsGmt(std::string_view verb)
{
    constexpr std::array<std::string_view, 8> kStreaming { "info", "analyze", "report", "replay", "sweep", "fit", "diff", "explain" };
    return std::find(kStreaming.begin(), kStreaming.end(), verb) != kStreaming.end();
}

std::string outOfMemoryMessage(
    std::string_view verb, const std::vector<std::string>& inputs, const std::function<bool(const std::string&)>& isGmt)
{
    // Review finding (2026-12-02): a bare "out of memory" said neither what was being read nor what to do.
    std::string m = "out of memory";
    std::string names; // every input, the first three by name
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        if (k == 3) {
            names += " and " + std::to_string(inputs.size() - 3) + " more";
            break;
        }
        names += (k ? ", " : "") + textForTerminal(inputs[k]);
    }
    if (!names.empty())
        m += " while working on " + names;
    m += inputs.size() > 1 ? ": the traces need more memory than the process may use"
                           : ": the trace needs more memory than the process may use";
    const std::string more(kRunWithMoreMemory);
    const bool streams = streamsGmt(verb);
    const auto other = streams ? std::find_if_not(inputs.begin(), inputs.end(), isGmt) : inputs.end();
    if (other != inputs.end()) {
        return m + ". " + std::string(verb) + " streams a .gmt in bounded memory: convert it first (gpumem convert "
            + textForTerminal(*other) + " -o " + textForTerminal(gmtPathBeside(*other)) + ") and give the .gmt "
            + "(docs/streaming.md), or " + more;
    }
    if (streams)
        // Not "leave those out" alone: the reviewer's replay, given no option, ran out streaming (F3, 2026-12-02).
        return m + ". " + std::string(verb) + " streams a .gmt holding what its answer needs (the blocks live at once), "
            + "but reads it whole with some options (--strict among them; docs/streaming.md lists them): if one was "
              "given, leave it out"
            + (replaysInMemory() ? "; GPUMEM_REPLAY_IN_MEMORY=1 is set, which reads it whole for the replays: unset it" : "")
            + "; or " + more;
    return m + ". " + std::string(verb) + " holds the whole trace in memory: " + more
        + "; docs/streaming.md lists the verbs that stream a .gmt";
}

std::string convertOutOfMemoryMessage(const std::string& in, bool whole)
{
    const std::string head = textForTerminal(in) + ": out of memory while converting it (the trace needs more memory than the process may use): ";
    if (whole)
        return head + "GPUMEM_CONVERT_WHOLE is set, so the .jsonl was read whole: unset it to stream it, or "
            + std::string(kRunWithMoreMemory);
    return head + "convert streams a .jsonl whose records are in trace order (memory events by time, then sequence; "
                  "kernels by start), holding only its tables, annotations and counter samples, and reads one out of "
                  "order whole: write the file in trace order, or "
        + std::string(kRunWithMoreMemory);
}

} // namespace gpumem::cli
