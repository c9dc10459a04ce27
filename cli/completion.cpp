#include "cli/completion.h"

#include "replay/policy_registry.h"

#include <ostream>
#include <set>

namespace gpumem::cli {

namespace {
    void printMatching(const std::vector<std::string>& candidates, const std::string& prefix, std::ostream& out)
    {
        for (const auto& c : candidates)
            if (c.starts_with(prefix))
                out << c << '\n';
    }

    // The value of --policy being typed, as bash split it at ':' (words after the option, '=' left out):
    // "pytorch" → policy names; "pytorch", ":", "exp" or "pytorch", ":", "expandable_segments", ":",
    // "True,max" → the option keys of pytorch, each printed as the current word would end.
    void completePolicy(const std::vector<std::string>& value, std::ostream& out)
    {
        const std::string& current = value.back();
        const auto& policies = replay::registeredPolicies();
        if (value.size() == 1) {
            std::vector<std::string> names;
            for (const auto& p : policies)
                names.push_back(p.name);
            printMatching(names, current, out);
            return;
        }
        // A key starts the spec's first option (right after "NAME:") or follows a ',' in the current word.
        const std::size_t comma = current.rfind(',');
        const bool afterName = value.size() == 3 && value[1] == ":";
        if (!afterName && comma == std::string::npos)
            return; // a value (True, 128, …): free text
        std::string name = value[0];
        name = name.substr(0, name.find('@')); // pytorch@2.1 → pytorch
        const std::string head = comma == std::string::npos ? std::string() : current.substr(0, comma + 1);
        const std::string partial = current.substr(head.size());
        for (const auto& p : policies)
            if (p.name == name)
                for (const auto& key : p.options)
                    if (key.starts_with(partial))
                        out << head << key << ":\n";
    }
} // namespace

void printCompletions(const std::vector<std::string>& words, const std::vector<std::unique_ptr<Command>>& commands,
    std::ostream& out)
{
    const std::string current = words.empty() ? std::string() : words.back();
    std::vector<std::string> verbs;
    for (const auto& c : commands)
        verbs.emplace_back(c->name());
    if (words.size() <= 1) {
        if (current.starts_with("-")) {
            printMatching({ "--help", "--version" }, current, out);
            return;
        }
        verbs.push_back("help");
        printMatching(verbs, current, out);
        return;
    }
    if (words[0] == "help") {
        if (words.size() == 2) {
            verbs.push_back("formats");
            printMatching(verbs, current, out);
        }
        return;
    }
    Command* command = nullptr;
    for (const auto& c : commands)
        if (c->name() == words[0])
            command = c.get();
    if (!command)
        return;
    po::positional_options_description positionals;
    const po::options_description options = optionsOf(*command, positionals);
    // After "--" (record's command) everything is the program's: files.
    for (std::size_t i = 1; i + 1 < words.size(); ++i)
        if (words[i] == "--")
            return;

    // The value being typed starts at words[first]: bash split "pytorch:exp" into "pytorch", ":", "exp".
    // Before it comes its option, maybe with '=' between ("--policy=pytorch").
    std::size_t first = words.size() - 1;
    while (first >= 3 && words[first - 1] == ":")
        first -= 2;
    std::size_t option = first - 1;
    if (option >= 2 && words[option] == "=")
        --option;
    const std::string& optionWord = words[option];
    const po::option_description* o = nullptr;
    if (option >= 1 && optionWord.starts_with("--"))
        o = options.find_nothrow(optionWord.substr(2), false);
    else if (option >= 1 && optionWord.size() == 2 && optionWord[0] == '-')
        o = options.find_nothrow(optionWord, false); // Boost keeps short names with their '-'
    if (o && o->semantic()->max_tokens() > 0) {
        if (o->long_name() == "policy")
            completePolicy({ words.begin() + static_cast<std::ptrdiff_t>(first), words.end() }, out);
        return; // another option's value: free text or a file
    }
    if (!current.starts_with("-"))
        return; // a positional: a trace file
    std::set<std::string> names;
    for (const auto& d : options.options())
        if (!d->long_name().empty() && !isPositional(positionals, d->long_name()))
            names.insert("--" + d->long_name());
    printMatching({ names.begin(), names.end() }, current, out);
}

} // namespace gpumem::cli
