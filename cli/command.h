#pragma once
// A CLI verb (osmium-tool's pattern): a parse-only setup that declares options, then run().
// Results go to `out`, diagnostics to `err`. Exit codes: 0 ok, 1 failed, 2 usage, 3 a gate option
// (--fail-if-oom, --max-reserved) was not met, 4 `fit` found no fitting capacity up to --max-capacity.
// Throw gpumem::UsageError for bad arguments (→ 2) and gpumem::Error for failures (→ 1); main() maps them.
#include "core/types.h"

#include <boost/program_options.hpp>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {
class Trace;
namespace analyze {
    struct Analysis;
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
};

// Every verb, in the order `gpumem help` lists them (cli/commands.cpp: one line per verb).
std::vector<std::unique_ptr<Command>> makeCommands();

// Shared option helpers.
// --device D (a device index as `gpumem info` lists them): nullopt when absent; UsageError when not an index.
std::optional<DeviceId> deviceOption(const po::variables_map& vm);
// --top N, declared as po::value<long long> so that a negative N is seen (an unsigned option read "-1"
// as 2^64 − 1): N ≥ 0, else UsageError.
std::size_t topOption(const po::variables_map& vm);

// --at values → InstantSpecs, TIME counted from the trace start; a TIME outside the trace's memory events
// is a UsageError (analyze, diff; cli/command_analyze.cpp).
std::vector<analyze::InstantSpec> instantSpecs(const std::vector<std::string>& at, const Trace& trace);
// A TIME among `specs` (parsed from `at`, in order) before the first memory event of the analyzed device
// has no state to break down: UsageError naming the device, its first event and what to give instead.
// The one check of analyze and diff (brief tx item 4).
void checkInstantsOnDevice(
    const analyze::Analysis& analysis, const std::vector<std::string>& at, const std::vector<analyze::InstantSpec>& specs);

// --format with the allowed values; returns the chosen one or throws UsageError listing them.
std::string checkedChoice(const po::variables_map& vm, const char* option, const std::vector<std::string>& allowed);

} // namespace gpumem::cli
