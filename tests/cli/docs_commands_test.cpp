// The README, docs/index.md and docs/guides.md are what a newcomer copies from, so every command they
// show is run here, as it is written, against the bundled traces (traces/, tests/data/).
//
// Rules (docs/development.md says the same):
// - A fenced block tagged `sh` (or `bash`, `shell`) is run line by line: a line ending in `\` joins
//   the next; a comment after ` #` is dropped; `# exit N` in that comment is the exit code the doc
//   promises (0 otherwise). Every command of such a block must be `gpumem …` or `gpumem-gui …`, or the
//   test fails: a doc cannot show a tested command this test does not run.
// - `gpumem` is this build's binary; a verb that `gpumem help VERB` does not know is skipped and
//   named on stdout (a verb added by a branch not yet merged).
// - `gpumem-gui TRACE …` opens its trace headless and renders the Summary page (`--screenshot
//   summary OUT.png` is put before the arguments) where the viewer is built; else it is skipped and
//   named.
// - Commands run in a scratch folder in which traces/ and tests/ link to the source tree, so files a
//   command writes (`-o report.html`) land there, not in the checkout.
// - A block tagged `sh no-test` (a GPU, PyTorch or a whole build is needed) is checked with `bash -n`
//   only, a `python` block with Python's parser only (skipped where python3 is absent); each is named
//   on stdout as not run.
// - An untagged block that shows a `gpumem` command fails the test: it must say whether it is run.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <sys/wait.h>

namespace fs = std::filesystem;
using gpumem::test::scratchDir;
using gpumem::test::slurp;

namespace {

struct Block {
    int line = 0; // of the opening fence, 1-based
    std::string info; // the fence's info string: "sh", "sh no-test", "python", ""
    std::vector<std::pair<int, std::string>> lines; // (1-based line, text)
};

std::vector<Block> fencedBlocks(const std::string& doc)
{
    std::vector<Block> blocks;
    std::istringstream in(doc);
    Block* open = nullptr;
    int n = 0;
    for (std::string l; std::getline(in, l);) {
        ++n;
        if (l.starts_with("```")) {
            if (open) {
                open = nullptr;
            } else {
                blocks.push_back({ n, l.substr(3), {} });
                open = &blocks.back();
            }
            continue;
        }
        if (open)
            open->lines.emplace_back(n, l);
    }
    if (open)
        ADD_FAILURE() << "the block opened at line " << open->line << " is never closed";
    return blocks;
}

std::string firstWord(const std::string& s)
{
    std::istringstream in(s);
    std::string w;
    in >> w;
    return w;
}

bool isShell(const std::string& info)
{
    const std::string lang = firstWord(info);
    return lang == "sh" || lang == "bash" || lang == "shell";
}

bool isNoTest(const std::string& info) { return info.find("no-test") != std::string::npos; }

struct Command {
    int line = 0;
    std::string text; // without its comment
    int expectedExit = 0;
};

// The comment of a shell line starts at a '#' outside quotes that follows a blank (or starts the line).
std::pair<std::string, std::string> splitComment(const std::string& l)
{
    char quote = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
        const char c = l[i];
        if (quote) {
            if (c == quote)
                quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '#' && (i == 0 || l[i - 1] == ' ' || l[i - 1] == '\t')) {
            return { l.substr(0, i), l.substr(i + 1) };
        }
    }
    return { l, "" };
}

std::string trimmed(std::string s)
{
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.pop_back();
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.erase(s.begin());
    return s;
}

std::vector<Command> commandsOf(const Block& b)
{
    std::vector<Command> out;
    const std::regex exitCode(R"(\bexit (\d+)\b)");
    Command cur;
    bool continuing = false;
    for (const auto& [n, raw] : b.lines) {
        auto [code, comment] = splitComment(raw);
        if (!continuing) {
            cur = { n, "", 0 };
        }
        std::smatch m;
        if (std::regex_search(comment, m, exitCode))
            cur.expectedExit = std::stoi(m[1]);
        std::string t = trimmed(code);
        continuing = !t.empty() && t.back() == '\\';
        if (continuing)
            t.pop_back();
        cur.text += (cur.text.empty() ? "" : " ") + trimmed(t);
        if (!continuing && !cur.text.empty())
            out.push_back(cur);
    }
    if (continuing)
        ADD_FAILURE() << "the block at line " << b.line << " ends inside a continued line";
    return out;
}

struct Run {
    int exitCode = -1;
    std::string out;
    std::string err;
};

Run shell(const fs::path& dir, const std::string& command, const std::string& env = "")
{
    static int counter = 0;
    const auto outFile = dir / ("out" + std::to_string(counter) + ".txt");
    const auto errFile = dir / ("err" + std::to_string(counter) + ".txt");
    const auto script = dir / ("cmd" + std::to_string(counter++) + ".sh");
    std::ofstream(script) << command << '\n';
    const std::string cmd = "cd '" + dir.string() + "' && " + env + " PATH='" + (dir / "bin").string()
        + "':\"$PATH\" sh '" + script.string() + "' >'" + outFile.string() + "' 2>'" + errFile.string()
        + "' </dev/null";
    const int status = std::system(cmd.c_str());
    Run r;
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(outFile);
    r.err = slurp(errFile);
    return r;
}

// A scratch folder laid out like the checkout for the documented relative paths, with bin/gpumem
// (and bin/gpumem-gui where the viewer is built) first on PATH.
fs::path docsWorkdir(bool& guiBuilt)
{
    const fs::path dir = scratchDir("docs-commands");
    const fs::path src = GPUMEM_SOURCE_DIR;
    fs::create_directories(dir / "bin");
    for (const char* sub : { "traces", "tests" })
        if (!fs::exists(dir / sub))
            fs::create_directory_symlink(src / sub, dir / sub);
    if (!fs::exists(dir / "bin/gpumem"))
        fs::create_symlink(GPUMEM_CLI, dir / "bin/gpumem");
    guiBuilt = false;
#ifdef GPUMEM_GUI
    if (fs::exists(GPUMEM_GUI)) {
        guiBuilt = true;
        std::ofstream(dir / "bin/gpumem-gui")
            << "#!/bin/sh\n"
               "# docs_commands_test: open the trace headless and render the Summary page.\n"
               "n=$(ls \"$GPUMEM_DOCS_SHOTS\" | wc -l)\n"
               "QT_QPA_PLATFORM=offscreen exec '" GPUMEM_GUI "' --screenshot summary \"$GPUMEM_DOCS_SHOTS/shot$n.png\" \"$@\"\n";
        fs::permissions(dir / "bin/gpumem-gui", fs::perms::owner_all, fs::perm_options::add);
    }
#endif
    fs::create_directories(dir / "shots");
    return dir;
}

bool verbKnown(const fs::path& dir, const std::string& verb)
{
    static std::map<std::string, bool> known;
    if (verb.empty() || verb.starts_with("-") || verb == "help")
        return true;
    auto it = known.find(verb);
    if (it == known.end())
        it = known.emplace(verb, shell(dir, "gpumem help '" + verb + "'").exitCode == 0).first;
    return it->second;
}

bool havePython()
{
    return std::system("command -v python3 >/dev/null 2>&1") == 0;
}

struct Tally {
    int ran = 0;
    int skipped = 0;
};

Tally runDoc(const std::string& relPath)
{
    const fs::path path = fs::path(GPUMEM_SOURCE_DIR) / relPath;
    const std::string doc = slurp(path);
    EXPECT_FALSE(doc.empty()) << relPath << " is missing or empty";
    bool guiBuilt = false;
    const fs::path dir = docsWorkdir(guiBuilt);
    const std::string shots = "GPUMEM_DOCS_SHOTS='" + (dir / "shots").string() + "'";
    Tally t;
    for (const Block& b : fencedBlocks(doc)) {
        const std::string where = relPath + ":" + std::to_string(b.line);
        std::string text;
        for (const auto& [n, l] : b.lines)
            text += l + "\n";
        const std::string lang = firstWord(b.info);
        if (lang == "python") {
            if (!havePython()) {
                std::cout << "NOT RUN " << where << " (python block; python3 is absent, not even parsed)\n";
                ++t.skipped;
                continue;
            }
            const fs::path f = dir / "block.py";
            std::ofstream(f) << text;
            const Run r = shell(dir, "python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' '" + f.string() + "'");
            EXPECT_EQ(r.exitCode, 0) << where << ": the python block does not parse:\n" << r.err;
            std::cout << "NOT RUN " << where << " (python block: needs PyTorch and a GPU; parsed only)\n";
            ++t.skipped;
            continue;
        }
        if (isShell(b.info) && isNoTest(b.info)) {
            const fs::path f = dir / "block.sh";
            std::ofstream(f) << text;
            const Run r = shell(dir, "bash -n '" + f.string() + "'");
            EXPECT_EQ(r.exitCode, 0) << where << ": the no-test block is not valid shell:\n" << r.err;
            for (const Command& c : commandsOf(b))
                std::cout << "NOT RUN " << relPath << ":" << c.line << " (sh no-test block; syntax-checked only): "
                          << c.text << "\n";
            ++t.skipped;
            continue;
        }
        if (!isShell(b.info)) {
            for (const auto& [n, l] : b.lines)
                if (l.starts_with("gpumem ") || l.starts_with("gpumem-gui ") || l.starts_with("$ gpumem"))
                    ADD_FAILURE() << relPath << ":" << n << ": a gpumem command in a block tagged '" << b.info
                                  << "'; tag the block `sh` (run by this test) or `sh no-test`";
            continue;
        }
        for (const Command& c : commandsOf(b)) {
            const std::string at = relPath + ":" + std::to_string(c.line);
            const std::string program = firstWord(c.text);
            if (program != "gpumem" && program != "gpumem-gui") {
                ADD_FAILURE() << at << ": '" << c.text << "' is not a gpumem command, so this test cannot run it;"
                              << " tag the block `sh no-test` or show gpumem commands only";
                continue;
            }
            if (program == "gpumem-gui" && !guiBuilt) {
                std::cout << "SKIPPED " << at << " (the viewer is not built here): " << c.text << "\n";
                ++t.skipped;
                continue;
            }
            const std::string verb = program == "gpumem" ? firstWord(c.text.substr(program.size())) : "";
            if (program == "gpumem" && !verbKnown(dir, verb)) {
                std::cout << "SKIPPED " << at << " ('" << verb << "' is not a verb of this gpumem: gpumem help "
                          << verb << " fails): " << c.text << "\n";
                ++t.skipped;
                continue;
            }
            const auto shotsBefore = std::distance(fs::directory_iterator(dir / "shots"), fs::directory_iterator {});
            const Run r = shell(dir, c.text, shots);
            ++t.ran;
            EXPECT_EQ(r.exitCode, c.expectedExit) << at << ": " << c.text << "\nstdout:\n"
                                                  << r.out.substr(0, 2000) << "\nstderr:\n"
                                                  << r.err.substr(0, 2000);
            if (program == "gpumem-gui" && r.exitCode == 0) {
                const auto shotsAfter = std::distance(fs::directory_iterator(dir / "shots"), fs::directory_iterator {});
                EXPECT_EQ(shotsAfter, shotsBefore + 1) << at << ": the viewer rendered no page";
            }
            if (program == "gpumem" && c.expectedExit == 0 && r.exitCode == 0) {
                EXPECT_FALSE(r.out.empty() && r.err.empty()) << at << ": printed nothing";
            }
        }
    }
    std::cout << relPath << ": " << t.ran << " commands run, " << t.skipped << " blocks or commands not run\n";
    return t;
}

} // namespace

TEST(DocsCommands, EveryReadmeCommandRunsWithItsDocumentedExitCode)
{
    const Tally t = runDoc("README.md");
    // The README's first answer to an OOM runs on the bundled trace: analyze and replay run here
    // whatever else is skipped (explain before its merge, the viewer where it is not built).
    EXPECT_GE(t.ran, 2);
}

TEST(DocsCommands, EveryDocsIndexCommandRunsWithItsDocumentedExitCode) { runDoc("docs/index.md"); }

TEST(DocsCommands, EveryGuideCommandRunsWithItsDocumentedExitCode)
{
    const Tally t = runDoc("docs/guides.md");
    EXPECT_GE(t.ran, 10);
}

// "One screen to a first answer": the README's first screen (60 lines) holds the OOM recipe, from
// recording a snapshot to the first command to run on it; the profiler recipe follows.
TEST(DocsCommands, ReadmeOpensWithTheOomRecipe)
{
    std::istringstream in(slurp(fs::path(GPUMEM_SOURCE_DIR) / "README.md"));
    int n = 0;
    int heading = 0, record = 0, profiler = 0, explain = 0;
    for (std::string l; std::getline(in, l);) {
        ++n;
        if (!heading && l == "## Got an OOM?")
            heading = n;
        if (!record && l.find("torch.cuda.memory._record_memory_history(") != std::string::npos)
            record = n;
        if (!profiler && l.find("profile_memory=True") != std::string::npos)
            profiler = n;
        if (!explain && l.starts_with("gpumem explain "))
            explain = n;
    }
    EXPECT_TRUE(heading > 0 && heading <= 30) << "'## Got an OOM?' is at line " << heading;
    EXPECT_TRUE(record > heading && record <= 40) << "_record_memory_history at line " << record;
    EXPECT_TRUE(explain > record && explain <= 60) << "gpumem explain at line " << explain;
    EXPECT_TRUE(profiler > heading && profiler <= 80) << "profile_memory=True at line " << profiler;
}

// Every relative link of the README, the change log and the docs pages leads to a file of the
// checkout (the README's reference material moved into docs/, so a broken link loses it).
TEST(DocsCommands, RelativeLinksOfTheReadmeAndTheDocsExist)
{
    const fs::path src = GPUMEM_SOURCE_DIR;
    std::vector<std::string> docs { "README.md", "CHANGELOG.md" };
    for (const auto& e : fs::directory_iterator(src / "docs"))
        if (e.path().extension() == ".md")
            docs.push_back("docs/" + e.path().filename().string());
    EXPECT_GE(docs.size(), 12u);
    const std::regex link(R"(\]\(([^)#\s]+)(#[^)\s]*)?\))");
    for (const std::string& rel : docs) {
        const fs::path path = src / rel;
        const std::string doc = slurp(path);
        int links = 0;
        for (auto it = std::sregex_iterator(doc.begin(), doc.end(), link); it != std::sregex_iterator(); ++it) {
            const std::string target = (*it)[1];
            if (target.find("://") != std::string::npos || target.starts_with("mailto:"))
                continue;
            ++links;
            EXPECT_TRUE(fs::exists(path.parent_path() / target)) << rel << " links to " << target << ", which does not exist";
        }
        if (rel == "README.md" || rel == "docs/index.md" || rel == "docs/guides.md") {
            EXPECT_GT(links, 3) << rel;
        }
    }
}
