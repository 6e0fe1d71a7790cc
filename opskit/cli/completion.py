"""``opskit completion bash|zsh|fish``: shell completion of commands, options, and of
group, topic and context names.

The script the command prints calls ``opskit`` back with ``_OPSKIT_COMPLETE=SHELL`` and
the command line up to the cursor in ``_OPSKIT_COMPLETE_ARGS``; :func:`complete` answers
(``main`` hands it the request before anything else, so an ordinary command never pays
for completion). Command names come from ``main.SUMMARIES`` without importing any
command; options from the one command on the line. Group and topic names are asked of
the cluster the line (``-b``, ``--context``) or the current context names, in a thread
given :data:`LOOKUP_TIMEOUT_S` seconds: a dead or slow cluster yields no names, never a
shell that hangs. Context names come from the config file. Where nothing is offered the
shell completes file names.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from typer import _click as click

#: the environment variables of the protocol between the scripts and opskit
COMPLETE_VAR = "_OPSKIT_COMPLETE"
ARGS_VAR = "_OPSKIT_COMPLETE_ARGS"
#: how long a name lookup may take (``$OPSKIT_COMPLETE_TIMEOUT`` overrides)
LOOKUP_TIMEOUT_S = 1.5

BASH = r"""# opskit completion for bash: eval "$(opskit completion bash)" in ~/.bashrc
_opskit_completion() {
    local IFS=$'\n'
    COMPREPLY=( $(env _OPSKIT_COMPLETE=bash _OPSKIT_COMPLETE_ARGS="${COMP_LINE:0:COMP_POINT}" \
                  "${COMP_WORDS[0]}" 2>/dev/null) )
    return 0
}
complete -o default -F _opskit_completion opskit
"""

ZSH = r"""#compdef opskit
# opskit completion for zsh: eval "$(opskit completion zsh)" in ~/.zshrc (after compinit)
_opskit_completion() {
  local -a items
  items=("${(@f)$(env _OPSKIT_COMPLETE=zsh _OPSKIT_COMPLETE_ARGS="$LBUFFER" \
                  "${words[1]}" 2>/dev/null)}")
  items=(${items:#})
  if (( ${#items} )); then
    _describe -t opskit 'opskit' items
  else
    _files
  fi
}
compdef _opskit_completion opskit
"""

FISH = r"""# opskit completion for fish: opskit completion fish > ~/.config/fish/completions/opskit.fish
function __opskit_complete
    set -l items (env _OPSKIT_COMPLETE=fish _OPSKIT_COMPLETE_ARGS=(commandline -cp) opskit 2>/dev/null)
    if test (count $items) -gt 0
        printf '%s\n' $items
    else
        __fish_complete_path (commandline -ct)
    end
end
complete -c opskit -f -a '(__opskit_complete)'
"""


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


SCRIPTS = {Shell.bash: BASH, Shell.zsh: ZSH, Shell.fish: FISH}


def completion(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish", show_default=False)],
) -> int:
    """Print the shell completion script for bash, zsh or fish.

    bash: eval "$(opskit completion bash)" in ~/.bashrc; zsh: eval "$(opskit completion zsh)"
    in ~/.zshrc after compinit; fish: opskit completion fish >
    ~/.config/fish/completions/opskit.fish. Completes commands, options, and group, topic
    and context names (from the cluster of -b/--context or the current context, at most
    1.5 s: a dead cluster gives no names, never a hanging shell).
    """
    sys.stdout.write(SCRIPTS[shell])
    return 0


# ----- answering a completion request -----

def request_words() -> tuple[list[str], str] | None:
    """(complete words after ``opskit``, the word being completed) of the request in the
    environment; None when this run is no completion request."""
    shell = os.environ.get(COMPLETE_VAR)
    if not shell:
        return None
    line = os.environ.get(ARGS_VAR, "")
    try:
        words = shlex.split(line)
    except ValueError:  # an open quote: the word being typed
        words = line.split()
    if not line or line[-1].isspace():
        words.append("")
    words = words[1:] if words else [""]  # the program name
    if not words:
        words = [""]
    return words[:-1], words[-1]


def complete(cli: click.Command) -> int:
    """Answer the completion request: one candidate per line (zsh ``value:help``, fish
    ``value<TAB>help``). Never fails: an error offers nothing."""
    from typer._click.shell_completion import ShellComplete

    shell = os.environ.get(COMPLETE_VAR, "bash")
    req = request_words()
    if req is None:
        return 0
    args, incomplete = req

    class _Complete(ShellComplete):
        name = shell
        source_template = ""

        def source_vars(self) -> dict[str, Any]:  # pragma: no cover - scripts are ours
            return {}

        def get_completion_args(self) -> tuple[list[str], str]:  # pragma: no cover
            return args, incomplete

        def format_completion(self, item: Any) -> str:  # pragma: no cover
            return str(item.value)

    try:
        items = _Complete(cli, {}, "opskit", COMPLETE_VAR).get_completions(args, incomplete)
    except Exception:  # noqa: BLE001 - completion offers nothing rather than a traceback
        items = []
    out: list[str] = []
    for item in items:
        if item.type != "plain":  # file or directory: the shell's own completion
            continue
        value, help_ = str(item.value), " ".join(str(item.help or "").split())
        if shell == "zsh":
            out.append(value.replace(":", r"\:") + (f":{help_}" if help_ else ""))
        elif shell == "fish":
            out.append(value + (f"\t{help_}" if help_ else ""))
        else:
            out.append(value)
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


# ----- names from the cluster and the config file -----

def _lookup_timeout() -> float:
    try:
        return max(0.1, min(float(os.environ.get("OPSKIT_COMPLETE_TIMEOUT", "")), 10.0))
    except ValueError:
        return LOOKUP_TIMEOUT_S


def _cluster_names(ctx: click.Context, kind: str) -> list[str]:
    """Group or topic names of the cluster the line names, within the lookup timeout."""
    params = dict(ctx.params)
    bootstrap = params.get("bootstrap_server") or params.get("bootstrap")
    context = params.get("context")
    found: list[str] = []
    timeout = _lookup_timeout()

    def lookup() -> None:
        try:
            ask()
        except Exception:  # noqa: BLE001 - no cluster, refused, timed out: no names
            found.clear()

    def ask() -> None:
        from confluent_kafka.admin import AdminClient

        from opskit.adapters.files.config_file import resolve_connection

        conf = resolve_connection(bootstrap, context).to_librdkafka()
        conf["socket.connection.setup.timeout.ms"] = max(1000, int(timeout * 1000))
        conf["logger"] = _silent_logger()
        admin = AdminClient(conf)
        if kind == "topic":
            md = admin.list_topics(timeout=timeout)
            found.extend(t for t in md.topics if not t.startswith("__"))
        else:
            result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
            found.extend(g.group_id for g in result.valid)

    worker = threading.Thread(target=lookup, daemon=True, name="opskit-complete")
    worker.start()
    worker.join(timeout)  # a dead cluster: nothing offered, the thread is left behind
    return sorted(found) if not worker.is_alive() else []


def _silent_logger() -> Any:
    import logging

    log = logging.getLogger("opskit.complete.librdkafka")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def _context_names() -> list[str]:
    from opskit.adapters.files.config_file import OpskitConfig

    return sorted(OpskitConfig.load().contexts)


def _names(kind: str) -> Any:
    def complete_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        try:
            names = _context_names() if kind == "context" else _cluster_names(ctx, kind)
        except Exception:  # noqa: BLE001 - completion offers nothing rather than an error
            return []
        return [n for n in names if n.startswith(incomplete)]

    return complete_names


#: parameter name -> the kind of name it takes
_NAMED = {"group": "group", "topic": "topic", "context": "context"}
#: commands whose NAME argument is a context
_CONTEXT_ARGS = {"use", "show", "delete"}


def add_name_completion(cmd: Any, parent: str = "") -> Any:
    """Complete group, topic and context names on every command of ``cmd`` (one place
    instead of a completer in every command)."""
    subs = getattr(cmd, "commands", None)
    if isinstance(subs, dict):
        for sub in subs.values():
            add_name_completion(sub, cmd.name or "")
        return cmd
    for p in getattr(cmd, "params", ()):
        kind = _NAMED.get(p.name or "")
        if kind is None and parent == "context" and cmd.name in _CONTEXT_ARGS \
                and p.name == "name":
            kind = "context"
        if kind is not None and getattr(p, "_custom_shell_complete", None) is None:
            p._custom_shell_complete = _names(kind)
    return cmd
