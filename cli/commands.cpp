#include "cli/command.h"

#include "core/display_width.h"
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
    constexpr std::size_t kWidth = 100;
    const std::string indent = "  ";
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        // Greedy at single blanks, as analyze::wrapText; but a word that no line could hold (a long path) stays on
        // the line it starts on, rather than leaving that line a stub ("gpumem info: error:") above it.
        std::string current;
        std::size_t width = 0;
        bool atStart = true;
        for (std::size_t start = 0; start <= line.size();) {
            std::size_t end = line.find(' ', start);
            if (end == std::string::npos)
                end = line.size();
            const std::string word = line.substr(start, end - start);
            const std::size_t w = displayWidth(word);
            if (!atStart && !word.empty() && width + 1 + w > kWidth && indent.size() + w <= kWidth) {
                out += current + '\n';
                current = indent + word;
                width = indent.size() + w;
            } else {
                current += (atStart ? "" : " ") + word;
                width += (atStart ? 0 : 1) + w;
            }
            atStart = false;
            start = end + 1;
        }
        while (!current.empty() && current.back() == ' ')
            current.pop_back();
        out += current + '\n';
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
