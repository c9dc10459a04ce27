// The bash completion (cli/gpumem.bash, installed as share/bash-completion/completions/gpumem) run in
// a real bash against the real binary: it offers every verb `gpumem help` lists, every option
// `gpumem help VERB` lists, and the replay registry's policy names and option keys.
#include "tests/cli/cli_runner.h"

#include "replay/policy_registry.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

using gpumem::test::runCli;
using gpumem::test::scratchDir;
using gpumem::test::slurp;

namespace {

std::vector<std::string> splitLines(const std::string& text)
{
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

// What the completion function leaves in COMPREPLY for `gpumem WORDS…` with the cursor at the end of
// the last word, bash splitting the line as it would ('=' and ':' are words of their own, as with
// the default COMP_WORDBREAKS), one candidate a line.
std::string complete(const std::vector<std::string>& words)
{
    auto dir = scratchDir("completion");
    std::string quoted;
    for (const auto& w : words)
        quoted += " '" + w + "'";
    const std::string script = "source '" GPUMEM_SOURCE_DIR "/cli/gpumem.bash'\n"
                               "COMP_WORDS=('" GPUMEM_CLI "'"
        + quoted + ")\nCOMP_CWORD=" + std::to_string(words.size())
        + "\n_gpumem\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n";
    std::ofstream(dir / "complete.sh") << script;
    const std::string cmd = "bash '" + (dir / "complete.sh").string() + "' >'" + (dir / "out.txt").string()
        + "' 2>'" + (dir / "err.txt").string() + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "err.txt");
    EXPECT_EQ(slurp(dir / "err.txt"), "");
    std::string out = slurp(dir / "out.txt");
    return out == "\n" ? std::string() : out; // printf of no candidates prints one empty line
}

std::set<std::string> completeSet(const std::vector<std::string>& words)
{
    auto lines = splitLines(complete(words));
    return { lines.begin(), lines.end() };
}

// The verbs of `gpumem help`: the indented lines under "verbs:".
std::vector<std::string> verbsFromHelp()
{
    auto help = runCli("help");
    EXPECT_EQ(help.exitCode, 0);
    std::vector<std::string> verbs;
    bool inVerbs = false;
    for (const auto& line : splitLines(help.out)) {
        if (line == "verbs:") {
            inVerbs = true;
            continue;
        }
        if (inVerbs && !line.starts_with("  "))
            break;
        if (inVerbs)
            verbs.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
    return verbs;
}

// The long options of `gpumem help VERB`, as Boost prints them ("  -o [ --output ] arg", "  --top arg").
std::set<std::string> optionsFromHelp(const std::string& verb)
{
    auto help = runCli("help " + verb);
    EXPECT_EQ(help.exitCode, 0) << verb;
    std::set<std::string> options;
    static const std::regex option(R"(^  (?:-\w \[ )?(--[A-Za-z0-9][A-Za-z0-9-]*))");
    for (const auto& line : splitLines(help.out))
        if (std::smatch m; std::regex_search(line, m, option))
            options.insert(m[1]);
    return options;
}

TEST(BashCompletion, OffersEveryVerbThatHelpLists)
{
    const auto verbs = verbsFromHelp();
    ASSERT_GE(verbs.size(), 9u) << "the verb list of 'gpumem help' was not found";
    std::set<std::string> expected(verbs.begin(), verbs.end());
    expected.insert("help");
    EXPECT_EQ(completeSet({ "" }), expected);
    // `gpumem help <TAB>`: the verbs and the formats topic.
    expected.erase("help");
    expected.insert("formats");
    EXPECT_EQ(completeSet({ "help", "" }), expected);
}

TEST(BashCompletion, CompletesAVerbFromItsPrefix)
{
    EXPECT_EQ(complete({ "re" }), "report\nrecord\nreplay\n"); // in the order of `gpumem help`
    EXPECT_EQ(complete({ "an" }), "analyze\n");
    EXPECT_EQ(complete({ "--v" }), "--version\n");
    EXPECT_EQ(complete({ "frob" }), "");
}

TEST(BashCompletion, OffersEveryOptionOfEachVerbThatItsHelpLists)
{
    for (const auto& verb : verbsFromHelp()) {
        const auto options = optionsFromHelp(verb);
        EXPECT_GE(options.size(), 2u) << verb; // at least --help and one of its own
        EXPECT_EQ(completeSet({ verb, "--" }), options) << "gpumem " << verb;
    }
    EXPECT_EQ(complete({ "replay", "traces/mlp_train.jsonl", "--fail" }), "--fail-if-oom\n");
}

TEST(BashCompletion, OffersThePolicyNamesAfterPolicy)
{
    std::set<std::string> names;
    for (const auto& p : gpumem::replay::registeredPolicies())
        names.insert(p.name);
    ASSERT_TRUE(names.count("pytorch") && names.count("tf-bfc"));
    EXPECT_EQ(completeSet({ "replay", "traces/mlp_train.jsonl", "--policy", "" }), names);
    EXPECT_EQ(completeSet({ "sweep", "--policy", "=", "" }), names); // --policy=<TAB>
    EXPECT_EQ(complete({ "fit", "--policy", "tf-" }), "tf-bfc\n");
}

TEST(BashCompletion, OffersAPolicysOptionKeysAfterItsName)
{
    // pytorch:exp<TAB> and pytorch:expandable_segments:True,max<TAB> (bash's words split at ':').
    EXPECT_EQ(complete({ "replay", "--policy", "pytorch", ":", "exp" }), "expandable_segments:\n");
    EXPECT_EQ(complete({ "replay", "--policy", "pytorch", ":", "expandable_segments", ":", "True,max_s" }),
        "True,max_split_size_mb:\n");
    std::set<std::string> keys;
    for (const auto& p : gpumem::replay::registeredPolicies())
        if (p.name == "pytorch")
            for (const auto& k : p.options)
                keys.insert(k + ":");
    EXPECT_EQ(completeSet({ "replay", "--policy", "pytorch", ":" }), keys); // pytorch:<TAB>
    // A value after a key is free text.
    EXPECT_EQ(complete({ "replay", "--policy", "pytorch", ":", "expandable_segments", ":", "" }), "");
}

TEST(BashCompletion, LeavesFileNamesAndFreeValuesToBash)
{
    EXPECT_EQ(complete({ "info", "" }), "");             // the trace
    EXPECT_EQ(complete({ "convert", "-o", "" }), "");    // an output path
    EXPECT_EQ(complete({ "analyze", "--top", "" }), ""); // a number
    EXPECT_EQ(complete({ "record", "--", "--" }), "");   // the traced program's own arguments
}

} // namespace
