"""Shell completion, derived from the argument parser at the moment of the <TAB>, so that it
cannot drift from the commands.

`hami-dra-webhook __complete WORD... CURRENT` prints the candidates one a line, each with its
description after a tab (a command's or an option's help, first clause), then `:N`, the
directive in cobra's format (0: the shell may complete file names, 4: it must not);
`__completeNoDesc` prints the candidates alone, as cobra's. kubectl reads the same format from
`kubectl_complete-hami` for `kubectl hami <TAB>` (and drops the descriptions itself when its
own completion asks for none), and the scripts of `completion bash|zsh|fish` are small shims
that call it: bash shows the descriptions as cobra's scripts do, in parentheses beside each
candidate while several are left; zsh beside each, after `--`; fish in its own column.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Any, TextIO

FILES = 0  # cobra's ShellCompDirectiveDefault: no candidates means file names
NO_FILES = 4  # cobra's ShellCompDirectiveNoFileComp
COMPLETE_COMMAND = "__complete"
COMPLETE_NO_DESCRIPTIONS = "__completeNoDesc"
DESCRIPTION_WIDTH = 60  # a description longer than this is cut at a word, with "…"
# Values that are paths: the shell completes file names for them.
PATH_METAVARS = frozenset({"PATH", "FILE", "DIR", "KUBECONFIG"})
SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Completion:
    candidates: list[str]
    directive: int
    descriptions: dict[str, str] = field(default_factory=dict)  # candidate -> what it is

    def render(self, descriptions: bool = True) -> str:
        lines = []
        for candidate in self.candidates:
            said = self.descriptions.get(candidate, "") if descriptions else ""
            lines.append(f"{candidate}\t{said}\n" if said else f"{candidate}\n")
        return "".join(lines) + f":{self.directive}\n"


def complete(parser: argparse.ArgumentParser, words: list[str]) -> Completion:
    """What may follow `words[:-1]`, starting with `words[-1]` (the word being typed)."""
    *done, current = words or [""]
    expecting: argparse.Action | None = None
    positionals = 0
    for word in done:
        if expecting is not None:
            expecting = None
            continue
        if word.startswith("-") and word != "-":
            action = _option(parser, word.split("=", 1)[0])
            if action is not None and action.nargs != 0 and "=" not in word:
                expecting = action if _takes_value(action) else None
            continue
        sub = _subcommands(parser).get(word)
        if sub is not None:
            parser, positionals = sub, 0
        else:
            positionals += 1
    if expecting is not None:
        return _values(expecting, current, done)
    if current.startswith("-"):
        if "=" in current:
            name, value = current.split("=", 1)
            action = _option(parser, name)
            if action is None:
                return Completion([], NO_FILES)
            values = _values(action, value, done)
            return Completion([f"{name}={v}" for v in values.candidates], values.directive)
        options = _options(parser)
        found = sorted(o for o in options if o.startswith(current))
        return Completion(found, NO_FILES, {o: options[o] for o in found})
    subcommands = _subcommands(parser)
    if subcommands:
        said = _subcommand_help(parser)
        names = sorted(n for n in subcommands if not n.startswith("_") and n.startswith(current))
        return Completion(names, NO_FILES, {n: said.get(n, "") for n in names})
    positional = _positional(parser, positionals)
    if positional is None:
        return Completion([], NO_FILES)
    return _values(positional, current, done)


def _options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option a user may type (its long name, or its only one), with its description;
    options whose help is suppressed are not offered."""
    found = {}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        said = describe(parser, action)
        for name in action.option_strings:
            if name.startswith("--") or len(action.option_strings) == 1:
                found[name] = said
        if isinstance(action, argparse.BooleanOptionalAction):  # --x and --no-x share a help
            for name in action.option_strings:
                if name.startswith("--no-"):
                    found[name] = f"the opposite of --{name[5:]}"
    return found


def _subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: describe(parser, choice) for choice in action._choices_actions}
    return {}


def describe(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An action's help as a completion shows it: its first sentence, on one line, at most
    DESCRIPTION_WIDTH characters (cut at a word, before a parenthesis it would leave open,
    with "…")."""
    text = action.help or ""
    if "%" in text:  # argparse's own expansion of %(default)s and its kin
        with contextlib.suppress(KeyError, TypeError, ValueError):
            text = text % {**vars(action), "prog": parser.prog}
    text = _first_sentence(" ".join(text.split()))
    if len(text) <= DESCRIPTION_WIDTH:
        return text
    cut = text[: DESCRIPTION_WIDTH - 1].rsplit(" ", 1)[0]
    if cut.count("(") > cut.count(")") and len(cut.rsplit(" (", 1)[0]) >= 12:
        cut = cut.rsplit(" (", 1)[0]
    return cut.rstrip(",;:") + "…"


def _first_sentence(text: str) -> str:
    """`text` up to its first "; " or ". " outside parentheses."""
    depth = 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth <= 0 and char in ";." and text[at + 1 : at + 2] == " ":
            return text[:at]
    return text


def _option(parser: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    return parser._option_string_actions.get(name)


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and not isinstance(
        action, argparse._StoreConstAction | argparse._HelpAction | argparse._VersionAction
    )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: dict[str, argparse.ArgumentParser] = action.choices
            return found
    return {}


def _positional(parser: argparse.ArgumentParser, index: int) -> argparse.Action | None:
    positionals = [a for a in parser._actions if not a.option_strings]
    for action in positionals:
        if action.nargs in ("*", "+", argparse.REMAINDER):
            return action
        if index == 0:
            return action
        index -= 1
    return None


def _values(action: argparse.Action, current: str, done: list[str]) -> Completion:
    if action.dest == "context":  # as kubectl: the kubeconfig's contexts
        names = [n for n in _contexts(done) if n.startswith(current)]
        return Completion(sorted(names), NO_FILES)
    if action.choices is not None:
        choices: Any = action.choices
        return Completion([str(c) for c in choices if str(c).startswith(current)], NO_FILES)
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    wants_path = metavar in PATH_METAVARS or action.dest in ("kubeconfig", "out_dir", "out")
    return Completion([], FILES if wants_path else NO_FILES)


def _contexts(done: list[str]) -> list[str]:
    """The contexts of the kubeconfig the command would read (its --kubeconfig, if given
    before); none when it cannot be read (completion never fails)."""
    from hami_dra_webhook.kube import kubeconfig

    given = None
    for flag, value in itertools.pairwise(done):
        if flag == "--kubeconfig":
            given = value
    given = next((w.split("=", 1)[1] for w in done if w.startswith("--kubeconfig=")), given)
    try:
        return list(kubeconfig.read(kubeconfig.files(given)).contexts)
    except (kubeconfig.KubeconfigProblem, OSError, ValueError):
        return []


def script(shell: str, program: str) -> str:
    """The shim for `shell`: it asks `program __complete` at each <TAB>."""
    function = "_" + program.replace("-", "_")
    if shell == "bash":
        return BASH.format(program=program, function=function)
    if shell == "zsh":
        return ZSH.format(program=program, function=function)
    return FISH.format(program=program, function=function)


BASH = """\
# bash completion for {program} (generated by `{program} completion bash`)
{function}() {{
    # bash splits `--output=json` at the `=` (COMP_WORDBREAKS): join such words back, ask for
    # `--output=`'s values, and hand bash only what follows the `=`, the part it replaces.
    local words=() word i out directive
    for ((i = 1; i <= COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        if ((${{#words[@]}})) && [[ ${{words[-1]}} == -* ]] &&
            [[ $word == "=" || ( ${{words[-1]}} == *= && ${{COMP_WORDS[i-1]}} == "=" ) ]]; then
            words[-1]+=$word
        else
            words+=("$word")
        fi
    done
    out=$("{program}" __complete "${{words[@]}}" 2>/dev/null) || return
    directive=${{out##*:}}
    out=${{out%:*}}
    local IFS=$'\\n' current=${{words[-1]}} tab=$'\\t'
    COMPREPLY=($out)
    if [[ $current == -*=* && $COMP_WORDBREAKS == *=* ]]; then
        COMPREPLY=("${{COMPREPLY[@]#"${{current%%=*}}="}}")
        current=${{current#*=}}
    fi
    if [ "${{#COMPREPLY[@]}}" -eq 0 ] && [ "$directive" = 0 ]; then
        compopt -o filenames 2>/dev/null  # (not in a completion function: a test's call)
        COMPREPLY=($(compgen -f -- "$current"))
        return
    fi
    if [ "${{#COMPREPLY[@]}}" -eq 1 ]; then
        COMPREPLY=("${{COMPREPLY[0]%%$tab*}}")
        return
    fi
    # Several left: each shown beside its description, as cobra's scripts show them.
    local comp desc longest=0 width
    for comp in "${{COMPREPLY[@]}}"; do
        comp=${{comp%%$tab*}}
        ((${{#comp}} > longest)) && longest=${{#comp}}
    done
    width=$((${{COLUMNS:-80}} - longest - 4))
    for i in "${{!COMPREPLY[@]}}"; do
        comp=${{COMPREPLY[i]%%$tab*}}
        desc=${{COMPREPLY[i]#"$comp"}}
        desc=${{desc#$tab}}
        if [ -n "$desc" ] && ((width > 8)); then
            ((${{#desc}} > width)) && desc="${{desc:0:width-1}}…"
            comp+=$(printf '%*s' $((longest - ${{#comp}})) '')
            comp+="  ($desc)"
        fi
        COMPREPLY[i]=$comp
    done
}}
complete -F {function} {program}
"""

ZSH = """\
#compdef {program}
# zsh completion for {program} (generated by `{program} completion zsh`). Installed in $fpath it
# is autoloaded at the first <TAB>, and completes that <TAB> too; sourced, it only registers.
compdef _{program} {program}

_{program}() {{
    local -a out
    out=("${{(@f)$({program} __complete "${{(@)words[2,CURRENT]}}" 2>/dev/null)}}")
    local directive=${{out[-1]#:}}
    out=("${{(@)out[1,-2]}}")
    if [[ $words[CURRENT] == -*=* ]]; then
        local name=${{words[CURRENT]%%=*}}=
        compset -P '*='
        out=("${{(@)out#$name}}")
    fi
    local -a found shown
    local line
    local -i longest=0
    for line in "${{out[@]}}"; do
        found+=("${{line%%$'\\t'*}}")
        (( ${{#found[-1]}} > longest )) && longest=${{#found[-1]}}
    done
    for line in "${{out[@]}}"; do  # each beside its description, in one column
        shown+=("${{(r:longest:)${{line%%$'\\t'*}}}}  -- ${{line#*$'\\t'}}")
    done
    if (( ${{#found}} )) && [[ ${{(F)out}} == *$'\\t'* ]]; then
        compadd -l -d shown -- "${{found[@]}}"  # one a line, each with its description
    elif (( ${{#found}} )); then
        compadd -- "${{found[@]}}"
    elif [[ $directive == 0 ]]; then
        _files
    fi
}}

if [[ $funcstack[1] == _{program} ]]; then
    _{program} "$@"
fi
"""

FISH = """\
# fish completion for {program} (generated by `{program} completion fish`)
function {function}
    set -l words (commandline -opc)
    set -l out ({program} __complete $words[2..-1] (commandline -ct) 2>/dev/null)
    set -l directive (string replace ':' '' -- $out[-1])
    set -e out[-1]
    if test (count $out) -gt 0
        printf '%s\\n' $out
    else if test "$directive" = 0
        __fish_complete_path (commandline -ct)
    end
end
complete -c {program} -f -a '({function})'
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description="Print a completion script. bash: `source <(hami-dra-webhook completion"
        ' bash)`; zsh: `hami-dra-webhook completion zsh > "${fpath[1]}/_hami-dra-webhook"`;'
        " fish: `hami-dra-webhook completion fish | source`.",
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(run=lambda args, stdin, stdout, stderr: _print(args, stdout))


def _print(args: argparse.Namespace, stdout: TextIO) -> int:
    stdout.write(script(args.shell, "hami-dra-webhook"))
    return 0


def run_complete(
    root: argparse.ArgumentParser, words: list[str], stdout: TextIO, descriptions: bool = True
) -> int:
    """`__complete WORD...`: read before argparse, which would take the words for options."""
    stdout.write(complete(root, words).render(descriptions))
    return 0
