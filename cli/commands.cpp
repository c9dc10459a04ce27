#include "cli/command.h"

#include "analyze/comparison.h" // wrapText
#include "core/error.h"

#include <sstream>

namespace gpumem::cli {

std::unique_ptr<Command> makeInfoCommand();
std::unique_ptr<Command> makeConvertCommand();
std::unique_ptr<Command> makeAnalyzeCommand();
std::unique_ptr<Command> makeDiffCommand();
std::unique_ptr<Command> makeReportCommand();
std::unique_ptr<Command> makeRecordCommand();
std::unique_ptr<Command> makeReplayCommand();
std::unique_ptr<Command> makeSweepCommand();
std::unique_ptr<Command> makeFitCommand();
std::unique_ptr<Command> makeExplainCommand();
std::unique_ptr<Command> makeRanksCommand();

std::vector<std::unique_ptr<Command>> makeCommands()
{
    std::vector<std::unique_ptr<Command>> v;
    v.push_back(makeInfoCommand());
    v.push_back(makeConvertCommand());
    v.push_back(makeExplainCommand());
    v.push_back(makeAnalyzeCommand());
    v.push_back(makeDiffCommand());
    v.push_back(makeReportCommand());
    v.push_back(makeRanksCommand());
    v.push_back(makeRecordCommand());
    v.push_back(makeReplayCommand());
    v.push_back(makeSweepCommand());
    v.push_back(makeFitCommand());
    return v;
}

po::options_description optionsOf(Command& c, po::positional_options_description& positionals)
{
    po::options_description opts(std::string("options of 'gpumem ") + std::string(c.name()) + "'");
    opts.add_options()("help,h", "show this help and exit");
    c.setup(opts, positionals);
    return opts;
}

bool isPositional(const po::positional_options_description& positionals, const std::string& name)
{
    // max_total_count() is unbounded (~0u) for a trailing TRACE...: one position per name is enough.
    for (unsigned i = 0; i < positionals.max_total_count() && i < 64; ++i)
        if (positionals.name_for_position(i) == name)
            return true;
    return false;
}

std::string fitMessage(const std::string& text)
{
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        const std::string wrapped = analyze::wrapText(line, 100, "  ", true);
        out += wrapped.empty() ? std::string("\n") : wrapped;
    }
    return out;
}

std::string checkedChoice(const po::variables_map& vm, const char* option, const std::vector<std::string>& allowed)
{
    std::string value = vm[option].as<std::string>();
    for (const auto& a : allowed)
        if (a == value)
            return value;
    std::string list;
    for (const auto& a : allowed)
        list += (list.empty() ? "" : ", ") + a;
    throw UsageError(std::string("--") + option + " '" + value + "' is not one of: " + list);
}

} // namespace gpumem::cli
