#pragma once
// `gpumem __complete WORD...`: the shell completion's source of truth. The bash completion
// (cli/gpumem.bash) hands over the command line typed so far and prints what this returns, so its
// verbs, options and policy names are the CLI's own and cannot drift from them. Hidden from
// `gpumem help`.
#include "cli/command.h"

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace gpumem::cli {

// Writes to `out`, one a line, the completions of words.back() (the word being typed, possibly
// empty) given the words before it: the command line after "gpumem" as bash splits it, so
// "--policy=pyt" arrives as "--policy", "=", "pyt" and "pytorch:exp" as "pytorch", ":", "exp".
// Completes the verb (and `help`), `help`'s topics, a verb's long options (not its positionals),
// and after --policy the policy names, then the option keys of the named policy
// (replay/policy_registry.h; a key is printed with its trailing ':'). Prints nothing where a file
// name or a free value goes, so the shell completes file names. Never throws for any input.
void printCompletions(const std::vector<std::string>& words, const std::vector<std::unique_ptr<Command>>& commands,
    std::ostream& out);

} // namespace gpumem::cli
