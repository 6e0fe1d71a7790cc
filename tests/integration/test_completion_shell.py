"""Shell completion, driven through real shells: bash loads ``opskit completion bash``
(``complete -p`` shows it registered) and its completion function is called as bash calls
it (COMP_LINE, COMP_POINT, COMP_WORDS, COMP_CWORD); COMPREPLY is what a Tab would offer.
Commands, options, group and topic names of a live cluster, context names; a dead
bootstrap server (refused, and one that accepts and never answers) offers nothing and
returns. zsh and fish (Debian packages; skipped where not installed) load their scripts,
and answer through the same protocol."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SilentServer, commit, create_topic, produce, run_cli

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the opskit of this checkout, as an installed user has it on PATH
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.pop("_OPSKIT_COMPLETE", None)
    return env


def bash_tab(line: str, lookup_s: float = 1.5) -> list[str]:
    """What bash's Tab offers at the end of ``line`` with opskit's completion loaded
    (``lookup_s``: how long a name lookup may take; the default is opskit's own)."""
    words = line.split(" ")
    script = (
        'source <(opskit completion bash)\n'
        'complete -p opskit\n'
        f'COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}\n'
        f'COMP_WORDS=({" ".join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}\n'
        f'_opskit_completion opskit {shlex.quote(words[-1])} {shlex.quote(words[-2])}\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n')
    env = _env() | {"OPSKIT_COMPLETE_TIMEOUT": str(lookup_s)}  # a loaded CI machine is slow
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, env=env, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    first, *rest = r.stdout.splitlines()
    assert first == "complete -o default -F _opskit_completion opskit"
    return [x for x in rest if x]


def test_commands_and_options() -> None:
    assert bash_tab("opskit co") == ["context", "completion"]
    assert bash_tab("opskit context i") == ["import"]
    assert bash_tab("opskit lag --gr") == ["--group"]
    assert "--command-config" in bash_tab("opskit health --")
    assert bash_tab("opskit completion ") == ["bash", "zsh", "fish"]


def test_names_from_the_cluster_and_contexts(kafka, uniq: str) -> None:
    topic, group = f"compl_{uniq}", f"compl-{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    produce(kafka.bootstrap, topic, {0: 1})
    commit(kafka.bootstrap, group, {(topic, 0): 1})
    bs = kafka.bootstrap
    assert bash_tab(f"opskit lag -b {bs} --group compl-{uniq[:3]}", 10) == [group]
    assert bash_tab(f"opskit lag -b {bs} --topic compl_{uniq[:3]}", 10) == [topic]
    ctx = f"compl-ctx-{uniq}"
    assert run_cli("context", "set", ctx, "-b", kafka.bootstrap).code == 0
    try:
        assert bash_tab("opskit context use compl-ctx") == [ctx]
        # the context on the line names the cluster
        assert bash_tab(f"opskit offsets export --context {ctx} --group compl-{uniq[:3]}",
                        10) == [group]
    finally:
        run_cli("context", "delete", ctx)


def test_dead_bootstrap_offers_nothing_and_returns() -> None:
    # refused at once, and a server that accepts and never answers (a hung broker):
    # the lookup gives up after its short timeout; the shell gets nothing, not a hang
    assert bash_tab("opskit lag -b 127.0.0.1:1 --group ") == []
    with SilentServer() as silent:
        assert bash_tab(f"opskit lag -b {silent.address} --topic ") == []
        assert bash_tab(f"opskit lag -b {silent.address} --gr") == ["--group"]


def _protocol(shell: str, line: str) -> list[str]:
    env = _env() | {"_OPSKIT_COMPLETE": shell, "_OPSKIT_COMPLETE_ARGS": line}
    r = subprocess.run(["opskit"], capture_output=True, text=True, env=env, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed (Debian: zsh)")
def test_zsh_loads_and_answers() -> None:
    r = subprocess.run(
        ["zsh", "-f", "-c", ("autoload -U compinit && compinit -u -D && "
                             "source <(opskit completion zsh) && print -r -- $_comps[opskit]")],
        capture_output=True, text=True, env=_env(), timeout=120, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "_opskit_completion", r.stdout + r.stderr
    assert _protocol("zsh", "opskit lag --gr") == ["--group:consumer group (repeatable)"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed (Debian: fish)")
def test_fish_loads_and_answers() -> None:
    r = subprocess.run(
        ["fish", "--no-config", "-c", ("opskit completion fish | source; "
                                       "complete -C 'opskit context u'")],
        capture_output=True, text=True, env=_env(), timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["use\tMake NAME the current context."], r.stdout
    assert _protocol("fish", "opskit lag --gr") == ["--group\tconsumer group (repeatable)"]
