"""No sandbox password ever leaves its password file (issue #15 s.6).

Every opskit command that talks to Kafka runs on the secured sandbox (SASL_SSL) as the
admin and as the monitor, twice each: ``--debug`` with text logs and ``--debug
--log-format json``. Each run is a real process (``python -m opskit.cli.main``), so
client libraries log as they would for a user. Then everything is searched for every
sandbox password (admin, monitor and HIP-30's services):

* each run's stdout and stderr;
* every file opskit wrote: the state directory (offset and ACL backups, exporter state,
  manifests) except the sandbox's own broker directory (the broker's JAAS config and the
  password files are where the secrets live by design), the config file, snapshots,
  exports and DR snapshots written with --file;
* the command line and the environment of every process the exporter starts (its
  collector child), read from /proc while it runs.

The password is searched as written and in the encodings a leak would take (base64 of
the PLAIN token, JSON escaping, repr).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import stop_process
from secured_scenario import Scenario, build, children, leaks, proc_text, secrets, written_files

from opskit.sandbox.ports import free_port_block  # below the ephemeral range

REPO = Path(__file__).resolve().parents[2]
#: how many of commands() only read (run 3 at a time); the rest change things, in order
READS = 19


@pytest.fixture(scope="module")
def scenario(kafka_sasl_ssl: Any, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return build(kafka_sasl_ssl, tmp_path_factory.mktemp("secret-grep"))


def commands(s: Scenario, role: str, tmp: Path) -> list[list[str]]:
    """Every command that connects to Kafka (read commands for both roles; the admin's
    mutations too, on the scenario's own groups), with the role's --context, and the
    context commands (which show the role's context, secrets masked)."""
    t, g, reg = s.topic, s.group, str(s.registry)
    ctx = s.args(role)
    out = [[*c, *ctx] for c in [
        ["lag", "-g", g], ["lag", "--all-groups", "-o", "json"],
        ["lag", "-g", g, "--watch", "--interval", "1s", "--iterations", "2", "-o", "json"],
        ["health"], ["health", "-o", "json"], ["throughput", "--interval", "1s"],
        ["snapshot", "-o", "json", "--file", str(tmp / f"snapshot-{role}.json")],
        ["topics", "diff", reg], ["topics", "apply", reg],
        ["acls", "diff", reg], ["acls", "lint", reg], ["acls", "apply", reg],
        ["offsets", "reset", "-g", s.reset_group_admin, "-t", t, "--to-earliest"],
        ["offsets", "export", "-g", g, "-o", "json"],
        ["dr", "snapshot", "-t", t, "-g", g, "--file", str(tmp / f"dr-{role}.json")],
        ["exporter", "--once"],
    ]]
    out += [["context", "show", ctx[-1]], ["context", "list"],
            ["acls", "monitor-principal", "monitor", reg]]
    assert len(out) == READS
    if role == "admin":
        out += [[*c, *ctx] for c in [
            ["offsets", "reset", "-g", s.reset_group_admin, "-t", t, "--to-latest", "--execute",
             "--yes", "--backup-dir", str(tmp / "backups")],
            ["acls", "apply", reg, "--execute", "--backup-dir", str(tmp / "acl-backups")],
            ["dr", "restore", str(tmp / "dr-admin.json"), "--backup-dir", str(tmp / "backups")],
        ]]
    else:  # a refused mutation prints its error too
        out.append(["offsets", "reset", "-g", s.reset_group_monitor, "-t", t, "--to-earliest",
                    "--execute", "--yes", "--backup-dir", str(tmp / "backups"), *ctx])
    return out


def run(argv: list[str], log_format: str) -> subprocess.CompletedProcess[str]:
    extra = [] if log_format == "text" else ["--log-format", "json"]
    return subprocess.run([sys.executable, "-m", "opskit.cli.main", "--debug", *extra, *argv],
                          capture_output=True, text=True, timeout=180, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("role", ["admin", "monitor"])
def test_no_password_in_any_output_or_file(scenario: Scenario, role: str, tmp_path: Path) -> None:
    forms = secrets(scenario.cluster)
    found: list[str] = []
    ran = 0
    if role == "admin":  # so that `acls apply --execute` changes something (and backs up)
        from opskit.adapters.acls.admin import AclsAdmin
        from opskit.core.acls import AclEntry

        with AclsAdmin(scenario.cluster.conn("admin"), timeout=15) as a:
            a.delete_acls([AclEntry(f"User:{scenario.service}", "TOPIC", scenario.topic, "WRITE")])
    cmds = commands(scenario, role, tmp_path)
    reads, changes = cmds[:READS], cmds[READS:]  # the changes use files the reads wrote
    runs = [(argv, fmt) for argv in reads for fmt in ("text", "json")]
    with ThreadPoolExecutor(3) as pool:  # independent processes: a third of the wall time
        done = list(pool.map(lambda a: (a, run(*a)), runs))
    done += [((argv, fmt), run(argv, fmt)) for argv in changes for fmt in ("text", "json")]
    for (argv, fmt), p in done:
        ran += 1
        for where, text in (("stdout", p.stdout), ("stderr", p.stderr)):
            found += [f"{' '.join(argv)} ({fmt}) {where}: {w}" for w in leaks(text, forms)]
        assert p.returncode != 70, f"{argv}: internal error: {p.stderr[-500:]}"
    # the debug runs did log something (the test would pass vacuously otherwise)
    assert ran >= 40
    files = list(written_files([tmp_path]))
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        found += [f"file {f}: {w}" for w in leaks(text, forms)]
    assert not found, "\n".join(found[:20])
    # the files that matter were written (the search would pass vacuously otherwise)
    assert any(f.name == f"snapshot-{role}.json" for f in files)
    if role == "admin":  # the monitor's DR snapshot and changes are refused (no file)
        assert any(f.name == "dr-admin.json" for f in files)
        assert any("acl-backups" in f.parts for f in files), "no ACL backup written"
        assert any("backups" in f.parts for f in files), "no offsets backup written"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_exporter_child_has_no_password(scenario: Scenario, log_format: str, tmp_path: Path) -> None:
    """The running exporter (collection in a child process): the child's command line and
    environment, and everything the exporter logged with --debug, hold no password."""
    forms = secrets(scenario.cluster)
    extra = [] if log_format == "text" else ["--log-format", "json"]
    log = tmp_path / "exporter.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "opskit.cli.main", "--debug", *extra, "exporter",
             "--port", str(free_port_block(1)), "--interval", "1s", *scenario.args("monitor")],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        kids: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not kids:
            time.sleep(0.5)
            kids = children(proc.pid)
        assert kids, f"the exporter started no child: {log.read_text()[-1000:]}"
        time.sleep(3)  # a few collections, logged at debug level
        found = []
        for k in kids:
            for what in ("cmdline", "environ"):
                found += [f"child {k} {what}: {w}" for w in leaks(proc_text(k, what) or "", forms)]
        assert proc.poll() is None, log.read_text()[-1000:]
    finally:
        stop_process(proc)
    text = log.read_text()
    assert "DEBUG" in text or '"level": "DEBUG"' in text, "no debug logging: nothing was checked"
    found += [f"exporter log: {w}" for w in leaks(text, forms)]
    assert not found, "\n".join(found)
