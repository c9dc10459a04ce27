#pragma once
// A CLI verb (osmium-tool's pattern): a parse-only setup that declares options, then run().
// Results go to `out`, diagnostics to `err`. Exit codes: 0 ok, 1 failed, 2 usage, 3 a gate option
// (--fail-if-oom, --max-reserved) was not met, 4 `fit` found no fitting capacity up to --max-capacity.
// Throw gpumem::UsageError for bad arguments (→ 2) and gpumem::Error for failures (→ 1); main() maps them.
#include "core/types.h"

#include <boost/program_options.hpp>

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {
class ImportStats;
class MemoryEventSource;
class Trace;
namespace analyze {
    struct Analysis;
    struct BoundedAnalysis;
    struct InstantSpec;
}
}

namespace gpumem::cli {

namespace po = boost::program_options;

enum ExitCode : int { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitGate = 3, kExitNoFit = 4 };

class Command {
public:
    virtual ~Command() = default;
    virtual std::string_view name() const = 0;
    // One line for `gpumem help`.
    virtual std::string_view summary() const = 0;
    // The synopsis line after "gpumem ", e.g. "info [options] TRACE...".
    virtual std::string_view synopsis() const = 0;
    // Extra text after the options in `gpumem help VERB` (examples, notes); may be empty.
    virtual std::string_view details() const { return {}; }
    // Declares options and positionals. Must not do work.
    virtual void setup(po::options_description& options, po::positional_options_description& positionals) = 0;
    virtual int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) = 0;
    // Whether the verb spreads its work with mpi::processGroup() (docs/mpi.md): started by mpirun or
    // srun, main() then joins the MPI job before run() and only rank 0 prints. Other verbs never call
    // MPI (so `mpirun gpumem record -- python train.py` leaves MPI to the program it runs).
    virtual bool spreadsOverProcesses() const { return false; }
};

// Every verb, in the order `gpumem help` lists them (cli/commands.cpp: one line per verb).
std::vector<std::unique_ptr<Command>> makeCommands();

// The options `gpumem VERB` parses: -h/--help, then those the verb's setup() declares (its
// positionals go into `positionals`).
po::options_description optionsOf(Command& c, po::positional_options_description& positionals);
// Whether option `name` stands for a positional argument (a verb's TRACE), which `gpumem help VERB`
// and the completion leave out of the option list.
bool isPositional(const po::positional_options_description& positionals, const std::string& name);

// Shared option helpers.
// --device D, declared as po::value<std::string>(): a bare integer is the device's position in
// `gpumem info`'s list (0, 1, …; not the ordinal of `hip:3`), anything else a device label as info
// prints it (cuda:1, hip:3, cpu). Returns the position in trace.devices(); nullopt when absent.
// UsageError for a label the trace lacks (listing its labels; `path` names the trace) or one that two
// devices share. A position past the end is left to the analysis or replay, which name the count.
std::optional<DeviceId> deviceOption(const po::variables_map& vm, const Trace& trace, std::string_view path);
// The help line of --device, the same in every verb.
inline constexpr const char* kDeviceOptionHelp
    = "device: its position in the list 'gpumem info' prints (0, 1, …) or its label there (cuda:1, hip:3, cpu);"
      " default: the busiest (docs/cli-options.md)";
// --top N, declared as po::value<std::string> and read here: digits only (an unsigned option read "-1" as
// 2^64 − 1, a long long gave Boost's generic message for 21 digits), else UsageError naming the value; a
// count past SIZE_MAX saturates (every row).
std::size_t topOption(const po::variables_map& vm);

// --at values → InstantSpecs, TIME counted from the trace start; a TIME outside the trace's memory events
// is a UsageError (analyze, diff; cli/command_analyze.cpp).
std::vector<analyze::InstantSpec> instantSpecs(const std::vector<std::string>& at, const Trace& trace);
// A TIME among `specs` (parsed from `at`, in order) before the first memory event of the analyzed device
// has no state to break down: UsageError naming the device, its first event and what to give instead.
// The one check of analyze and diff (brief tx item 4).
void checkInstantsOnDevice(
    const analyze::Analysis& analysis, const std::vector<std::string>& at, const std::vector<analyze::InstantSpec>& specs);

// The same two for an analysis of a .gmt in passes (analyze/bounded_analysis.h), which has no timeline: --at
// values parsed from the source's origin (analyze::sourceOrigin), and every check instantSpecs and
// checkInstantsOnDevice make, from the figures the passes keep (first and last event times, hasReserved, the
// device's first event), with the same messages. UsageError (analyze, diff).
std::vector<analyze::InstantSpec> streamedInstantSpecs(const std::vector<std::string>& at, const MemoryEventSource& source);
void checkStreamedInstants(
    const analyze::Analysis& analysis, const std::vector<std::string>& at, const std::vector<analyze::InstantSpec>& specs);

// The most memory events of a .gmt whose verdict `analyze` (text) and `report` prove by replay (explain's
// diagnosis in passes over the file, analyze::verdictFor over a source: several replays of the trace): 14 M, or
// GPUMEM_ANALYZE_IN_MEMORY_EVENTS (digits only, else UsageError). Over it their verdict gives the recorded facts
// and says the remedies were not proven by replay. Either way the .gmt is streamed (the name is from when the
// verdict read the trace whole); explain diagnoses any .gmt in passes.
std::uint64_t inMemoryEventBudget();
// Whether `path` holds a .gmt trace, by its content (importers' detectFormat, as `gpumem info` decides).
bool isGmtFile(const std::string& path);
// The verdict a streamed analysis leads with: the first facts explain's verdict gives, as recorded (the first
// recorded OOM: when, the request, the device's size, reserved and allocated then; else the reserved peak, or
// the allocated peak without a reserved series), the headline figure, and that the remedies were not replayed
// (explain's replays need the trace in memory). `skeleton`: the source's; `events`: the trace's memory events.
std::string streamedVerdict(const analyze::BoundedAnalysis& bounded, const Trace& skeleton, std::uint64_t events);

// What a verb that read a damaged trace says of it, once for each anomaly of error severity in `stats` (a cut
// or corrupt .gmt, a truncated .json.gz), wrapped to 100 columns on `err`, before its answer:
//   "gpumem VERB: note: PATH is damaged (CODE ×N): DETAIL. The answer covers what could be read; re-export or
//   re-record the trace for the rest"
// DETAIL without the "PATH: " an importer starts it with (placeOf, core/import_stats.h), so that PATH is said
// once. `written`: the file the verb wrote from the trace (convert), said in place of the answer, as a warning
// (a file that looks whole outlives the run): "gpumem convert: warning: PATH is damaged (CODE ×N): DETAIL.
// WRITTEN holds what could be read and records the anomaly ('gpumem info' lists it); re-export or re-record the
// trace for the rest, or give --strict to refuse a damaged input".
void noteDamagedTrace(std::string_view verb, const std::string& path, const ImportStats& stats, std::ostream& err,
    const std::string& written = {});

// For a verb that reads a .gmt in passes: parse() reads the options the skeleton decides (--device, --at);
// where it throws UsageError, a pass that checks the chunks comes first (a failed check opens the file again,
// checked at open: withGmtSource) and the damaged-trace note, as the verb reading the trace whole says it
// before it refuses an option; then the error. Call it before the first pass.
void parseBeforeThePasses(std::string_view verb, const std::string& path, const MemoryEventSource& source, std::ostream& err,
    const std::function<void()>& parse);

// A diagnostic (an error, a usage message: "gpumem VERB: error: …") as it is printed, within 100 display
// columns as the notes are: each line of `text` wrapped at blanks, continuations indented by two (a path or
// word wider than the line stays whole), every line ending in '\n'.
std::string fitMessage(const std::string& text);

// --format with the allowed values; returns the chosen one or throws UsageError listing them.
std::string checkedChoice(const po::variables_map& vm, const char* option, const std::vector<std::string>& allowed);

} // namespace gpumem::cli
