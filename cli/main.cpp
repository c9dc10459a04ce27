// gpumem — the command-line front end. Dispatches to one Command per verb (cli/commands.cpp).
#include "analyze/comparison.h"
#include "cli/command.h"
#include "cli/completion.h"
#include "cli/out_of_memory.h"

#include "core/display_width.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/message_quote.h"
#include "mpi/process_group.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace {
using namespace gpumem::cli;

// Trace files carry names written by other programs; printed raw, an escape sequence in a kernel or
// device name could retitle or recolour the user's terminal. The writers escape every name, path and
// echoed value (textForTerminal, core/message_quote.h); this buffer is the backstop for anything else:
// it replaces C0 control characters (except newline, tab and carriage return) and DEL with '?'.
class ControlCharFilter : public std::streambuf {
public:
    explicit ControlCharFilter(std::streambuf* sink)
        : m_sink(sink)
    {
    }

protected:
    int_type overflow(int_type ch) override
    {
        if (traits_type::eq_int_type(ch, traits_type::eof()))
            return traits_type::not_eof(ch);
        return m_sink->sputc(clean(traits_type::to_char_type(ch)));
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override
    {
        for (std::streamsize i = 0; i < n; ++i)
            if (traits_type::eq_int_type(m_sink->sputc(clean(s[i])), traits_type::eof()))
                return i;
        return n;
    }
    int sync() override { return m_sink->pubsync(); }

public:
    std::streambuf* sinkOf() const { return m_sink; }

protected:
private:
    static char clean(char c)
    {
        auto u = static_cast<unsigned char>(c);
        return ((u < 0x20 && c != '\n' && c != '\t' && c != '\r') || u == 0x7f) ? '?' : c;
    }
    std::streambuf* m_sink;
};

// Where the output of the MPI processes other than rank 0 goes.
class NullBuffer : public std::streambuf {
protected:
    int_type overflow(int_type ch) override { return traits_type::not_eof(ch); }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

void printOverview(std::ostream& out, const std::vector<std::unique_ptr<Command>>& commands)
{
    out << "gpumem " GPUMEM_VERSION " — offline GPU memory-trace analyzer and allocator simulator\n\n"
           "usage: gpumem <verb> [options] <trace...>\n"
           "       gpumem help [VERB|formats]\n"
           "       gpumem --version\n\n"
           "verbs:\n";
    for (const auto& c : commands) {
        std::string n(c->name());
        out << "  " << n << std::string(n.size() < 10 ? 10 - n.size() : 1, ' ') << c->summary() << '\n';
    }
    out << "\nRun 'gpumem help VERB' (or 'gpumem VERB -h') for a verb's options.\n"
           "Exit codes: 0 ok, 1 failed, 2 usage error, 3 a gate (--fail-if-oom, --max-reserved) was not met,\n"
           "4 fit found no capacity up to --max-capacity on which the trace runs without OOM.\n";
}

// Help text within 100 display columns (the house rule for text output; help2man makes the man pages
// from it): a longer line is wrapped at blanks, a table row ("  name   description") under its
// description column, an example command ("  gpumem …") with a trailing " \\" so it still pastes.
std::string fitHelp(const std::string& text)
{
    constexpr std::size_t kWidth = 100;
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (gpumem::displayWidth(line) <= kWidth) {
            out += line + '\n';
            continue;
        }
        const std::size_t lead = std::min(line.find_first_not_of(' '), line.size());
        if (line.compare(lead, 7, "gpumem ") == 0) {
            std::string wrapped = gpumem::analyze::wrapText(line, kWidth - 2, std::string(lead + 4, ' '));
            std::string joined;
            std::istringstream parts(wrapped);
            std::string part, next;
            std::getline(parts, part);
            while (std::getline(parts, next)) {
                joined += part + " \\\n";
                part = next;
            }
            out += joined + part + '\n';
            continue;
        }
        std::size_t column = lead + 4; // continuation: under the description of a table row, else indented
        if (const std::size_t gap = line.find("  ", lead); gap != std::string::npos && gap < 40) {
            const std::size_t desc = line.find_first_not_of(' ', gap);
            if (desc != std::string::npos && desc < 48)
                column = desc;
        }
        out += gpumem::analyze::wrapText(line, kWidth, std::string(column, ' '));
    }
    return out;
}

// What `write` prints, within 100 columns (fitHelp).
template <class Write> void printFitted(std::ostream& out, Write&& write)
{
    std::ostringstream raw;
    write(raw);
    out << fitHelp(raw.str());
}

void printVerbHelpRaw(std::ostream& out, Command& c);

void printVerbHelp(std::ostream& out, Command& c)
{
    printFitted(out, [&](std::ostream& raw) { printVerbHelpRaw(raw, c); });
}

void printVerbHelpRaw(std::ostream& out, Command& c)
{
    po::positional_options_description pos;
    auto all = optionsOf(c, pos);
    // The positional arguments are shown by the synopsis; listing them as --trace/--input options too
    // would only confuse.
    po::options_description opts(std::string("options of 'gpumem ") + std::string(c.name()) + "'");
    for (const auto& o : all.options())
        if (!isPositional(pos, o->long_name()))
            opts.add(o);
    out << "usage: gpumem " << c.synopsis() << "\n\n" << c.summary() << "\n\n" << opts;
    if (!c.details().empty())
        out << '\n' << c.details() << '\n';
}

int help(const std::vector<std::string>& args, const std::vector<std::unique_ptr<Command>>& commands);

// The synopsis on one line: `gpumem help` indents its continuation lines, and a line starting with
// "gpumem " is another form of the verb (replay --colocate, --fidelity), joined with " | ".
std::string oneLineSynopsis(const Command& c)
{
    std::string line;
    std::string_view rest = c.synopsis();
    while (!rest.empty()) {
        const std::size_t nl = rest.find('\n');
        std::string_view part = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
        part.remove_prefix(std::min(part.find_first_not_of(' '), part.size()));
        if (part.empty())
            continue;
        if (!line.empty())
            line += part.starts_with("gpumem ") ? " | " : " ";
        line += part;
    }
    return line;
}

// A required positional argument (the trace file of most verbs) that was not given. Boost would
// report it as "the option '--trace' is required", an option no verb documents; throws UsageError
// naming what to give and the verb's synopsis instead.
void checkPositionals(const Command& c, const po::options_description& opts,
    const po::positional_options_description& pos, const po::variables_map& vm)
{
    for (unsigned i = 0; i < pos.max_total_count() && i < 64; ++i) {
        const std::string& name = pos.name_for_position(i);
        const po::option_description* o = opts.find_nothrow(name, false);
        if (o && o->semantic()->is_required() && !vm.count(name))
            throw gpumem::UsageError(std::string(name == "trace" && c.name() == "diff" ? "give two trace files A and B"
                                                                                       : "give a trace file")
                + " (usage: gpumem " + oneLineSynopsis(c) + ")");
    }
}
} // namespace

namespace gpumem::cli {
void printFormats(std::ostream& out); // command_info.cpp
}

namespace {
int help(const std::vector<std::string>& args, const std::vector<std::unique_ptr<Command>>& commands)
{
    if (args.empty()) {
        printFitted(std::cout, [&](std::ostream& raw) { printOverview(raw, commands); });
        return kExitOk;
    }
    if (args[0] == "help") {
        std::cout
            << "usage: gpumem help [VERB | formats]\n"
               "Without a verb: the list of verbs. With one: its options and details (the same as gpumem VERB -h).\n"
               "formats: the trace formats gpumem reads and how it detects them.\n";
        return kExitOk;
    }
    if (args[0] == "formats") {
        printFitted(std::cout, [](std::ostream& raw) { gpumem::cli::printFormats(raw); });
        return kExitOk;
    }
    for (const auto& c : commands)
        if (c->name() == args[0]) {
            printVerbHelp(std::cout, *c);
            return kExitOk;
        }
    std::cerr << fitMessage("gpumem help: unknown verb '" + gpumem::textForTerminal(args[0])
        + "'; run 'gpumem help' for the list");
    return kExitUsage;
}
} // namespace

// The trace paths among a verb's parsed arguments (TRACE of most verbs, IN of convert), for messages.
static std::vector<std::string> traceArguments(const po::variables_map& vm)
{
    std::vector<std::string> paths;
    for (const char* name : { "trace", "input" }) {
        if (!vm.count(name))
            continue;
        const auto& value = vm[name].value();
        if (const auto* one = boost::any_cast<std::string>(&value))
            paths.push_back(*one);
        else if (const auto* many = boost::any_cast<std::vector<std::string>>(&value))
            paths.insert(paths.end(), many->begin(), many->end());
    }
    return paths;
}

// Parses the verb's arguments and runs it: the exit code, the diagnostics on `err`. `local` is set for a
// failure that only this process may have met (not a usage error, which every process of an MPI job
// meets alike, nor one mpi::ProcessGroup::mapGather() shared), so main() can end the whole job.
static int runVerb(Command& command, const std::vector<std::string>& args, const std::string& verb, std::ostream& out,
    std::ostream& err, bool& local)
{
    po::variables_map vm; // read by the out-of-memory message: the traces the verb was given
    gpumem::setFatalReadErrorPrefix("gpumem " + verb); // a mapped input cut while read (core/file_io.h)
    try {
        po::positional_options_description pos;
        auto opts = optionsOf(command, pos);
        po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end()))
                      .options(opts)
                      .positional(pos)
                      .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
                      .run(),
            vm);
        if (vm.count("help")) {
            printVerbHelp(out, command);
            return kExitOk;
        }
        checkPositionals(command, opts, pos, vm);
        po::notify(vm);
        return command.run(vm, out, err);
    } catch (const po::too_many_positional_options_error&) {
        // Boost says "too many positional options have been specified on the command line" (review finding).
        err << fitMessage("gpumem " + verb + ": " + verb + " takes "
            + (verb == "diff" ? "two trace files, A and B" : "one trace file") + " (usage: gpumem "
            + oneLineSynopsis(command) + ")");
        return kExitUsage;
    } catch (const po::error& e) {
        err << fitMessage("gpumem " + verb + ": " + gpumem::messageForTerminal(e.what()) + "\nRun 'gpumem help " + verb
            + "' for its options.");
        return kExitUsage;
    } catch (const gpumem::UsageError& e) {
        err << fitMessage("gpumem " + verb + ": " + gpumem::messageForTerminal(e.what()));
        return kExitUsage;
    } catch (const gpumem::Error& e) {
        local = !gpumem::mpi::processGroup().lastFailureWasShared();
        err << fitMessage("gpumem " + verb + ": error: " + gpumem::messageForTerminal(e.what()));
        return kExitFailed;
    } catch (const std::bad_alloc&) {
        local = !gpumem::mpi::processGroup().lastFailureWasShared();
        // What was being read and what to do (cli/out_of_memory.h); the memory the verb held is free again here.
        // Building the message may fail too: then the bare words.
        std::string message = "out of memory";
        try {
            message = gpumem::cli::outOfMemoryMessage(verb, traceArguments(vm), gpumem::cli::isGmtFile);
        } catch (...) {
        }
        try {
            err << fitMessage("gpumem " + verb + ": error: " + message);
        } catch (...) {
            err << "gpumem " << verb << ": error: " << message << '\n';
        }
        return kExitFailed;
    } catch (const std::exception& e) {
        local = !gpumem::mpi::processGroup().lastFailureWasShared();
        err << fitMessage("gpumem " + verb + ": internal error: " + gpumem::messageForTerminal(e.what())
            + " — please report it with the input");
        return kExitFailed;
    }
}

int main(int argc, char** argv)
{
    std::ios::sync_with_stdio(false);
    ControlCharFilter outFilter(std::cout.rdbuf()), errFilter(std::cerr.rdbuf());
    std::cout.rdbuf(&outFilter);
    std::cerr.rdbuf(&errFilter);
    struct RestoreStreams {
        std::streambuf* out;
        std::streambuf* err;
        ~RestoreStreams()
        {
            std::cout.flush();
            std::cerr.flush();
            std::cout.rdbuf(out);
            std::cerr.rdbuf(err);
        }
    } restore { outFilter.sinkOf(), errFilter.sinkOf() };
    auto commands = makeCommands();
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        printFitted(std::cerr, [&](std::ostream& raw) { printOverview(raw, commands); });
        return kExitUsage;
    }
    const std::string verb = args[0];
    if (verb == "--version" || verb == "version") {
        if (args.size() > 1) {
            std::cerr << fitMessage("gpumem " + gpumem::textForTerminal(verb) + " takes no arguments ('"
                + gpumem::textForTerminal(args[1]) + "' given)");
            return kExitUsage;
        }
        std::cout << "gpumem " GPUMEM_VERSION "\n";
        return kExitOk;
    }
    if (verb == "__complete") { // the bash completion's question (cli/completion.h); not in the help
        printCompletions({ args.begin() + 1, args.end() }, commands, std::cout);
        return kExitOk;
    }
    if (verb == "help" || verb == "--help" || verb == "-h")
        return help({ args.begin() + 1, args.end() }, commands);

    Command* command = nullptr;
    for (const auto& c : commands)
        if (c->name() == verb)
            command = c.get();
    if (!command) {
        std::cerr << fitMessage("gpumem: unknown verb '" + gpumem::textForTerminal(verb)
            + "'; run 'gpumem help' for the list of verbs");
        return kExitUsage;
    }
    // Verbs that spread their work join the MPI job when an MPI launcher started this process; only rank 0
    // prints (docs/mpi.md).
    std::optional<gpumem::mpi::MpiSession> session;
    if (command->spreadsOverProcesses())
        try {
            session.emplace(argc, argv);
        } catch (const gpumem::Error& e) {
            std::cerr << fitMessage("gpumem " + verb + ": error: " + gpumem::messageForTerminal(e.what()));
            return kExitFailed;
        }
    const auto& group = gpumem::mpi::processGroup();
    // The other processes' output is dropped; their diagnostics are held, for a failure of their own.
    NullBuffer discard;
    std::ostream silent(&discard);
    std::ostringstream held;
    std::ostream& out = group.isRoot() ? std::cout : silent;
    std::ostream& err = group.isRoot() ? static_cast<std::ostream&>(std::cerr) : held;
    bool local = false;
    const int code = runVerb(*command, args, verb, out, err, local);
    if (!session || !session->active())
        return code;
    if (local && group.size() > 1) {
        // The other processes may be waiting for this one in a gather: end them all, after saying why.
        if (!group.isRoot())
            std::cerr << "gpumem " << verb << ": MPI process " << group.rank() << " of " << group.size()
                      << " failed on its own:\n"
                      << held.str();
        std::cout.flush();
        std::cerr.flush();
        session->abort(code);
    }
    return session->agreeExitCode(code);
}
