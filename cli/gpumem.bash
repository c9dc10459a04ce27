# bash completion for gpumem (installed as share/bash-completion/completions/gpumem).
# The candidates come from the gpumem being completed: `gpumem __complete WORD...` prints the verbs,
# a verb's options and the policy names (cli/completion.h), so this file never lists any of them.
# Where gpumem prints nothing (a trace file, an output path), bash completes file names.
_gpumem() {
    local prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
    [[ $prog == "~"* ]] && prog=${prog/#\~/$HOME}
    local words=("${COMP_WORDS[@]:1:COMP_CWORD}")
    # bash splits "--policy=x" and "pytorch:x" at '=' and ':'; right after one, the word typed is empty.
    if [[ $cur == "=" || $cur == ":" ]]; then
        words+=("")
    fi
    local IFS=$'\n'
    # shellcheck disable=SC2207 # one candidate a line; IFS is a newline
    COMPREPLY=($("$prog" __complete "${words[@]}" 2>/dev/null))
    # A policy's option key ends in ':' and takes its value right after it.
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *: ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -o bashdefault -o default -F _gpumem gpumem
