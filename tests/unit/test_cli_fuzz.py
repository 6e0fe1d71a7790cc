"""Fuzz-style test of the whole CLI: every subcommand x kinds of bad input.

The commands are enumerated from the registered typer app (``COMMANDS``), and
the inputs from each command's own parameters (by type and name), so a new
command or option is covered without editing this file. Kinds of input:

- numbers: NaN, +-inf, 1e309, 20-digit integers, negatives, fractions for integers;
- durations: 20-digit, 1e9 s, NaN, negative, garbage;
- text: empty, not UTF-8 (argv bytes decoded as surrogate escapes), control
  characters, 10,000 characters; choices: a value not offered;
- files: binary, UTF-16, JSON and YAML nested 5,000 deep (deeper in
  test_safe_files.py), a number of 5,000 digits, endless (/dev/zero),
  a directory, missing, empty; as targets to write: a character device node, a
  FIFO, a directory and a symlink to the FIFO (all inside the test's temporary
  directory: a regression could then only replace those);
- every command once against an unreachable broker (127.0.0.1:1, --timeout 0.5),
  and once with each kind of broken opskit config file ($OPSKIT_CONFIG: the files
  above, bad thresholds, contexts of the wrong type, a password file that never ends).

All cases run in one child process (``tests/cli_fuzz_runner.py``), each through
``opskit.cli.main.main`` as ``tests.helpers.run_cli`` does. Asserted for every
case: the exit code is documented (never 70), stderr is exactly one line
starting ``opskit: error:`` on failure and has no such line on success, no
"Traceback" anywhere; for the child: no signal, and no hang (the subprocess
timeout is the hang detector, not a speed assertion). Values that are invalid
whatever the command (NaN, overflow, empty or non-UTF-8 names, absurd
durations) must fail. Afterwards the non-regular targets are still what they were.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pytest
import typer
import yaml

from opskit.cli import exits
from opskit.cli.main import app, register_all
from tests.pd_receiver import make_self_signed_cert

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "cli_fuzz_runner.py"
KEY = "0123456789abcdef0123456789abcdef"
UNREACHABLE = "127.0.0.1:1"

#: str parameters that take a duration (``5s``, ``10m``)
DURATION_PARAMS = {"interval", "window", "duration", "quiet_period", "update_interval",
                   "collection_timeout", "stale_after", "status_window", "by_duration"}
#: str parameters that name a file to read (given every bad input file) or to write
#: (given every bad target)
FILE_PARAMS = {"plan_file", "from_json"}
TARGET_PARAMS = {"write_plan"}
#: parameters whose value is a name: empty or non-UTF-8 must be refused
NAME_PARAMS = {"group", "topic", "context", "bootstrap_server", "bootstrap", "name",
               "dead_letter_topic", "billing_topic", "cluster", "dedup_key"}

#: extra arguments that keep a command from doing real work when a fuzzed value is
#: accepted: no serving forever, no JVM started, nothing sent
SAFE_ARGS: dict[str, list[str]] = {
    "exporter": ["--once", "--port", "0", "--listen", "127.0.0.1", "--collector", "thread"],
    "dlq watch": ["--once"],
    "sandbox up": ["--brokers", "2"],  # refused in the body: a cluster is never started
    "sandbox load": ["--duration", "1"],
    "sandbox down": ["--name", "fuzz-none"],
    "sandbox stop-node": ["--name", "fuzz-none"],
    "sandbox start-node": ["--name", "fuzz-none"],
    "sandbox status": ["--name", "fuzz-none"],
    "offsets reset": ["--all-topics", "--to-earliest"],
    "page trigger": ["--events-url", "https://127.0.0.1:1"],
    "page resolve": ["--events-url", "https://127.0.0.1:1"],
    "page acknowledge": ["--events-url", "https://127.0.0.1:1"],
}


@dataclass(frozen=True)
class Case:
    command: str
    kind: str
    argv: list[str]
    must_fail: bool
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Files:
    good_key: Path
    inputs: dict[str, str]
    targets: dict[str, str]
    configs: dict[str, str]


def _leaves() -> Iterator[tuple[str, Any]]:
    register_all()
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            for n, sub in subs.items():
                yield from walk(sub, path + [n])
        else:
            yield " ".join(path), cmd

    yield from walk(root, [])


def _kind(param: Any) -> str:
    t = type(param.type).__name__
    if "Float" in t:
        return "float"
    if "Int" in t:
        return "int"
    if "Bool" in t:
        return "bool"
    if "Choice" in t:
        return "choice"
    if "Path" in t:
        return "path"
    return "str"


def _flag(param: Any) -> str | None:
    opts = [o for o in param.opts if o.startswith("--")]
    return opts[0] if opts else None


def _baseline(name: str, cmd: Any, files: Files) -> tuple[list[str], dict[str, list[str]]]:
    """Arguments that make the command runnable (required values, an unreachable
    broker, a short timeout), as a list of positionals and a map option -> args."""
    positionals: list[str] = []
    options: dict[str, list[str]] = {}
    for p in cmd.params:
        flag = _flag(p) if p.param_type_name == "option" else None
        kind = _kind(p)
        if p.param_type_name == "argument":
            positionals.append(str(files.good_key) if kind == "path" else
                               ("1" if kind == "int" else "fuzz"))
            continue
        if flag is None:
            continue
        if p.name == "bootstrap_server":
            options[flag] = [UNREACHABLE]
        elif p.name == "timeout" and kind == "float":
            options[flag] = ["0.5"]  # the smallest --timeout: unreachable cases end sooner
        elif p.required:
            if kind == "path":
                options[flag] = [str(files.good_key)]
            elif kind == "int":
                options[flag] = ["1"]
            elif kind == "choice":
                options[flag] = [next(iter(p.type.choices))]
            else:
                options[flag] = ["fuzz"]
    if any(p.name == "group" for p in cmd.params) and name not in ("dlq watch",):
        flag = next(_flag(p) for p in cmd.params if p.name == "group")
        if flag is not None and flag not in options:
            options[flag] = ["fuzz-group"]
    extra = SAFE_ARGS.get(name, [])
    i = 0
    while i < len(extra):
        if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            options[extra[i]] = [extra[i + 1]]
            i += 2
        else:
            options[extra[i]] = []
            i += 1
    return positionals, options


def _argv(name: str, positionals: list[str], options: dict[str, list[str]]) -> list[str]:
    argv = name.split()
    for flag, vals in options.items():
        argv += [flag, *vals]
    return argv + positionals


def _values(param: Any, files: Files) -> list[tuple[str, str, bool]]:
    """(kind, value, must_fail) for one parameter."""
    kind = _kind(param)
    out: list[tuple[str, str, bool]] = []
    if kind == "float":
        out += [("nan", "nan", True), ("inf", "inf", True), ("-inf", "-inf", True),
                ("overflow", "1e309", True), ("huge", "99999999999999999999", True),
                ("negative", "-1", False)]
    elif kind == "int":
        out += [("huge", "99999999999999999999999", True),
                ("-huge", "-99999999999999999999999", True),
                ("nan", "nan", True), ("fraction", "1.5", True), ("negative", "-1", False)]
    elif kind == "choice":
        out += [("bogus-choice", "bogus\udcff", True)]
    elif kind == "path":
        out += [(k, v, False) for k, v in files.inputs.items()]
        out += [(k, v, False) for k, v in files.targets.items()]
        out += [("non-utf8-path", "f\udcff", True)]
    elif kind == "str":
        is_name = param.name in NAME_PARAMS
        out += [("non-utf8", "g\udcff\udcfe", True), ("control", "a\x1bb\nc", is_name),
                ("long", "x" * 10000, True)]
        if is_name:
            out += [("empty", "", True), ("blank", "  ", True)]
        if param.name in FILE_PARAMS:
            out += [(k, v, False) for k, v in files.inputs.items()]
        if param.name in TARGET_PARAMS:
            out += [(k, v, False) for k, v in files.targets.items()]
        if param.name in DURATION_PARAMS:
            out += [("dur-huge", "99999999999999999999s", True),
                    ("dur-1e9", "1000000000s", True), ("dur-nan", "nan", True),
                    ("dur-neg", "-5s", True), ("dur-garbage", "5 parsecs", True)]
    return out


def build_cases(files: Files) -> list[Case]:
    cases: list[Case] = []
    for name, cmd in _leaves():
        positionals, options = _baseline(name, cmd, files)
        base = _argv(name, positionals, options)
        cases.append(Case(name, "baseline", base, False))
        for ckind, cpath in files.configs.items():  # a broken opskit config file
            cases.append(Case(name, f"config={ckind}", base, False, (("OPSKIT_CONFIG", cpath),)))
        for p in cmd.params:
            kind = _kind(p)
            if kind == "bool" or p.hidden:
                continue
            for vkind, value, must_fail in _values(p, files):
                if p.param_type_name == "argument":
                    idx = [q for q in cmd.params if q.param_type_name == "argument"].index(p)
                    pos = list(positionals)
                    pos[idx] = value
                    argv = _argv(name, [], options) + ["--", *pos]
                else:
                    flag = _flag(p)
                    if flag is None:
                        continue
                    opts = {k: v for k, v in options.items() if k != flag}
                    # --flag=VALUE: a value starting with '-' is not taken for an option
                    argv = _argv(name, [], opts) + [f"{flag}={value}"]
                    if positionals:
                        argv += ["--", *positionals]
                cases.append(Case(name, f"{p.name}={vkind}", argv, must_fail))
    return cases


def _make_files(tmp: Path) -> Files:
    good = tmp / "key.txt"
    good.write_text(KEY + "\n")
    binary = tmp / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    utf16 = tmp / "utf16.txt"
    utf16.write_text("contexts: {}\n" + KEY, encoding="utf-16")
    deep_json = tmp / "deep.json"
    deep_json.write_text("[" * 5_000 + "]" * 5_000)
    deep_yaml = tmp / "deep.yaml"
    deep_yaml.write_text("a: " + "[" * 5_000 + "]" * 5_000 + "\n")
    long_int = tmp / "long-int.json"  # beyond Python's int() digit limit, as JSON and YAML
    long_int.write_text('{"version": 1, "a": ' + "1" * 5_000 + "}\n")
    empty = tmp / "empty.txt"
    empty.write_text("")
    a_dir = tmp / "a-dir"
    a_dir.mkdir()
    inputs = {"binary": str(binary), "utf16": str(utf16), "deep-json": str(deep_json),
              "deep-yaml": str(deep_yaml), "long-int": str(long_int), "endless": "/dev/zero", "directory": str(a_dir),
              "missing": str(tmp / "missing.json"), "empty-file": str(empty)}
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    link = tmp / "link-to-fifo"
    link.symlink_to(fifo)
    targets = {"fifo": str(fifo), "symlink-to-fifo": str(link), "target-dir": str(a_dir)}
    if os.geteuid() == 0:  # a node like /dev/full, inside tmp (never a real /dev path)
        dev = tmp / "full-device"
        os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
        targets["char-device"] = str(dev)
    configs = dict(inputs)
    for ckind, text in {
        "bad-threshold": "thresholds:\n  default: {lag_warn: .inf, lag_crit: x}\n",
        "warn-above-crit": "thresholds:\n  groups: {g: {lag_warn: 9, lag_crit: 1}}\n",
        "contexts-list": "current-context: a\ncontexts: [1, 2]\n",
        "bad-security": "current-context: a\ncontexts:\n  a: {bootstrap: 'h:1', security: "
                        "{protocol: SASL_SSL, sasl_mechanism: 7, password_file: /dev/zero}}\n",
        "not-a-mapping": "- 1\n",
    }.items():
        p = tmp / f"config-{ckind}.yaml"
        p.write_text(text)
        configs[ckind] = str(p)
    return Files(good, inputs, targets, configs)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KAFKA_BOOTSTRAP_SERVERS", "OPSKIT_CONTEXT", "OPSKIT_PAGERDUTY_URL",
                        "OPSKIT_PAGERDUTY_ROUTING_KEY_FILE", "OPSKIT_PAGERDUTY_CA_FILE")}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp / "home"),
                "OPSKIT_CONFIG": str(tmp / "config.yaml"), "OPSKIT_STATE": str(tmp / "state"),
                "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "XDG_DATA_HOME": str(tmp / "xdg-data"),
                "PYTHONFAULTHANDLER": "1"})
    return env


#: child processes run side by side: most slow cases wait on the unreachable
#: broker's timeout, not on the CPU
CHILDREN = 4


def run_cases(cases: list[Case], tmp: Path, timeout: float) -> list[dict[str, Any]]:
    """Run the cases in a few children; fail naming the case on a signal or a hang."""
    chunks = [list(range(k, len(cases), CHILDREN)) for k in range(CHILDREN)]
    procs = []
    for k, idx in enumerate(chunks):
        spec = tmp / f"cases-{k}.json"
        spec.write_text(json.dumps([{"argv": cases[i].argv, "env": dict(cases[i].env)}
                                    for i in idx]))
        work = tmp / f"child-{k}"
        work.mkdir()
        procs.append(subprocess.Popen(
            [sys.executable, str(RUNNER), str(spec)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=work, env=_env(tmp)))
    results: dict[int, dict[str, Any]] = {}
    for idx, proc in zip(chunks, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"hang: no end within {timeout}s; last case started: "
                        f"{_last(out, idx, cases)}")
        if proc.returncode != 0:
            pytest.fail(f"runner died (status {proc.returncode}) in case "
                        f"{_last(out, idx, cases)}: {err.decode()[-2000:]}")
        # nothing reached the real stderr (a C library writing to fd 2, a warning)
        assert err.decode().strip() == "", err.decode()[-2000:]
        for ln in out.decode().splitlines():
            if ln.startswith("{"):
                res = json.loads(ln)
                results[idx[res["i"]]] = res
    assert sorted(results) == list(range(len(cases)))
    return [results[i] for i in range(len(cases))]


def _last(out: bytes, idx: list[int], cases: list[Case]) -> Case | None:
    started = [ln for ln in out.decode().splitlines() if ln.startswith("START")]
    return cases[idx[int(started[-1].split()[1])]] if started else None


def problems(case: Case, res: dict[str, Any]) -> list[str]:
    code, err, out = res["code"], res["err"], res["out"]
    found = []
    if code not in exits.DOCUMENTED:
        found.append(f"exit {code} is not documented")
    if "Traceback" in err or "Traceback" in out:
        found.append("a traceback")
    err_lines = err.splitlines()
    if code == exits.OK:
        if any(ln.startswith("opskit: error") for ln in err_lines):
            found.append("exit 0 with an error line")
        if case.must_fail:
            found.append("exit 0 on a value that must be refused")
    # a failure says why in one line; a result with a severity exit code (1-3,
    # data on stdout) or help for a bare command group may print nothing
    elif (err_lines or case.must_fail) and not (
            len(err_lines) == 1 and err_lines[0].startswith("opskit: error: ")):
        found.append(f"stderr is not one 'opskit: error:' line: {err_lines[:3]!r}")
    return found


@pytest.mark.timeout(900)
def test_every_command_survives_bad_input(tmp_path: Path) -> None:
    files = _make_files(tmp_path)
    cases = build_cases(files)
    commands = {c.command for c in cases}
    assert len(commands) >= 30 and "lag" in commands and "offsets reset" in commands
    results = run_cases(cases, tmp_path, timeout=600)
    bad = []
    for case, res in zip(cases, results, strict=True):
        for p in problems(case, res):
            shown = [a if len(a) < 80 else a[:40] + "..." for a in case.argv]
            bad.append(f"{case.command} [{case.kind}] {shown!r}: {p}; "
                       f"stderr={res['err'][-300:]!r}")
    # the non-regular targets are untouched
    assert stat.S_ISFIFO(os.stat(files.targets["fifo"]).st_mode)
    assert Path(files.targets["symlink-to-fifo"]).is_symlink()
    assert Path(files.targets["target-dir"]).is_dir()
    if "char-device" in files.targets:
        assert stat.S_ISCHR(os.stat(files.targets["char-device"]).st_mode)
    assert not bad, f"{len(bad)} of {len(cases)} cases broke the rules:\n" + "\n".join(bad[:60])


# ----- named bad inputs: one case per class found by the bad-input runs (issues 21, 28) -----


@dataclass(frozen=True)
class Named:
    """A command line with the exit code it must end with and a word its one error line
    must hold (``says``; for exit 0, a word on stdout)."""

    kind: str
    argv: list[str]
    code: int
    says: str = ""
    env: tuple[tuple[str, str], ...] = ()


class TlsServer:
    """An HTTPS endpoint on 127.0.0.1 (a free port, a self-signed certificate) that
    misbehaves on purpose. ``drip``: sends its TLS handshake in small pieces and then an
    HTTP answer one byte every 0.5 s, never finishing (each piece comes well within any
    per-read timeout, so only a deadline over the whole exchange ends it); ``empty``:
    answers every request ``200 {}`` (valid JSON, no Kubernetes object). Bounded: every
    connection ends when the server stops, or after 300 s."""

    def __init__(self, directory: Path, mode: str) -> None:
        self.cert, key = make_self_signed_cert(directory)
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(self.cert, key)
        self._mode = mode
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._srv.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Self:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._srv.close()
        for t in self._threads:
            t.join(10)

    def _accept(self) -> None:
        self._srv.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _send(self, conn: socket.socket, data: bytes, piece: int, pause: float) -> None:
        for i in range(0, len(data), piece):
            if self._stop.wait(pause):
                raise OSError("server stopped")
            conn.sendall(data[i:i + piece])

    def _serve(self, conn: socket.socket) -> None:
        end = time.monotonic() + 300
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self._ctx.wrap_bio(incoming, outgoing, server_side=True)
        conn.settimeout(5)
        drip = self._mode == "drip"
        try:
            while True:  # the handshake, its bytes sent in pieces
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    self._send(conn, outgoing.read(), 200 if drip else 1 << 20,
                               0.02 if drip else 0)
                    data = conn.recv(65536)
                    if not data:
                        return
                    incoming.write(data)
            self._send(conn, outgoing.read(), 200 if drip else 1 << 20, 0.02 if drip else 0)
            head = b""
            while b"\r\n\r\n" not in head:  # the request's head
                try:
                    head += tls.read(65536)
                except ssl.SSLWantReadError:
                    data = conn.recv(65536)
                    if not data:
                        return
                    incoming.write(data)
            if not drip:
                body = b"{}"
                tls.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Connection: close\r\nContent-Length: 2\r\n\r\n" + body)
                conn.sendall(outgoing.read())
                return
            answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            for i in itertools.count():  # one byte of the answer every 0.5 s
                if time.monotonic() > end:
                    return
                filler = b"X-Drip: 1\r\n"
                tls.write(answer[i:i + 1] if i < len(answer) else
                          filler[i % len(filler):i % len(filler) + 1])
                self._send(conn, outgoing.read(), 1 << 20, 0.5)
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()


def _kubeconfig(tmp: Path, server: TlsServer, name: str) -> Path:
    path = tmp / f"kubeconfig-{name}"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": server.url,
                                                "certificate-authority": str(server.cert)}}],
        "users": [{"name": "u", "user": {"token": "fuzz-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def _shape_files(tmp: Path) -> dict[str, str]:
    """Files of the right kind with the wrong content, for :func:`_named_cases`."""
    d = tmp / "shapes"
    d.mkdir()
    out: dict[str, str] = {}

    def put(name: str, text: str) -> None:
        (d / name).write_text(text)
        out[name] = str(d / name)

    put("acl-backup-int", json.dumps({"format": "opskit/acls-backup", "acls": [5]}))
    put("acl-backup-types", json.dumps({"format": "opskit/acls-backup", "acls": [
        {"principal": "User:a", "resource_type": "TOPIC", "resource_name": "t",
         "operation": "READ", "host": 7}]}))
    registry = yaml.safe_load((ROOT / "opskit" / "registry" / "hip30.yaml").read_text())
    long_name = json.loads(json.dumps(registry))
    long_name["security"]["principals"][0]["name"] = "x" * 10_000
    put("registry-long-principal", yaml.safe_dump(long_name))
    bogus = json.loads(json.dumps(registry))
    bogus["security"]["mechanism"] = "BOGUS"
    put("registry-bogus-mechanism", yaml.safe_dump(bogus))
    put("deep-json-100k", "[" * 100_000 + "]" * 100_000)
    put("config-security-list", "current-context: a\ncontexts:\n  a: {bootstrap: 'h:1', "
        "security: [1, 2]}\n")
    put("state-file", "a file where the state directory should be\n")
    put("dr-negative", json.dumps({
        "format": "opskit/dr-snapshot", "version": 1, "taken_at_ms": 1, "cluster_id": None,
        "topics": [{"name": "t", "partitions": -3, "replication_factor": 1, "configs": {}}],
        "groups": {}, "acls": None, "acls_note": None}))
    put("empty", "")
    put("null", "null\n")
    put("empty-json", "{}\n")
    put("plan-log-dirs", json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/tmp"]}]}))
    (d / "out").mkdir()
    out["out-dir"] = str(d / "out")
    (d / "dashboards").mkdir()
    (d / "dashboards" / "exits.dashboard.py").write_text("import sys\nsys.exit(5)\n")
    out["dashboards"] = str(d / "dashboards")
    return out


def _named_cases(tmp: Path, servers: dict[str, TlsServer]) -> list[Named]:
    b = ["-b", UNREACHABLE, "--timeout", "0.5"]
    long_topic = "t" * 249
    key = tmp / "routing.key"
    key.write_text(KEY + "\n")
    config = tmp / "config-named.yaml"
    config.write_text("current-context: c\ncontexts:\n  c: {bootstrap: '127.0.0.1:1'}\n")
    k8s = ["playbook", "scale-out", "--platform", "kubernetes", "--namespace", "kafka",
           "--statefulset", "kafka", "--context", "c"]
    with_config = (("OPSKIT_CONFIG", str(config)),)
    files = _shape_files(tmp)
    return [
        # files of the wrong shape: one line, exit 2, never 70 or exit 0
        Named("acl-backup-entry-not-mapping", ["acls", "restore", files["acl-backup-int"], *b],
              exits.USAGE, "not a mapping"),
        Named("acl-backup-host-not-text", ["acls", "restore", files["acl-backup-types"], *b],
              exits.USAGE, "must be text"),
        Named("acl-registry-long-principal", ["acls", "lint", files["registry-long-principal"],
              "--no-cluster"], exits.USAGE, "longer than 255"),
        Named("acl-registry-bogus-mechanism", ["acls", "lint", files["registry-bogus-mechanism"],
              "--no-cluster"], exits.USAGE, "mechanism"),
        Named("replay-manifest-deep", ["replay", "--manifest", files["deep-json-100k"], *b],
              exits.USAGE, "nests too deeply"),
        Named("context-security-list", ["context", "list"], exits.USAGE, "'security'",
              (("OPSKIT_CONFIG", files["config-security-list"]),)),
        Named("sandbox-state-is-a-file", ["sandbox", "list"], exits.USAGE, "not a directory",
              (("OPSKIT_STATE", files["state-file"]),)),
        Named("dr-snapshot-negative-partitions", ["dr", "restore", files["dr-negative"], *b],
              exits.USAGE, "partitions"),
        Named("alerts-config-empty", ["alerts", "generate", "--config", files["empty"],
              "--out-dir", files["out-dir"]], exits.USAGE, "empty"),
        Named("alerts-config-null", ["alerts", "generate", "--config", files["null"],
              "--out-dir", files["out-dir"]], exits.USAGE, "empty"),
        Named("alerts-config-device", ["alerts", "generate", "--config", "/dev/null",
              "--out-dir", files["out-dir"]], exits.USAGE, "device"),
        Named("replay-kafka-option-noequals", ["replay", "-g", "g", "-t", "t",
              "--kafka-option", "noequals", *b], exits.USAGE, "KEY=VALUE"),
        Named("reassign-plan-log-dirs", ["reassign", "plan", "--from-json",
              files["plan-log-dirs"], *b], exits.USAGE, "log directories"),
        Named("dlq-duration-zero", ["dlq", "watch", "--duration", "0", "--routing-key-file",
              str(key), *b], exits.USAGE, "--duration"),
        Named("dlq-duration-empty", ["dlq", "watch", "--duration", "", "--routing-key-file",
              str(key), *b], exits.USAGE, "--duration"),
        Named("exporter-tls-cert-device", ["exporter", "--web-tls-cert", "/dev/null",
              "--web-tls-key", "/dev/null", *SAFE_ARGS["exporter"], *b], exits.USAGE, "device"),
        Named("exporter-tls-cert-junk", ["exporter", "--web-tls-cert", files["empty-json"],
              "--web-tls-key", files["empty-json"], *SAFE_ARGS["exporter"], *b], exits.USAGE,
              "PEM"),
        Named("dashboard-calls-sys-exit", ["dashboards", "generate", "--dir",
              files["dashboards"], "--check"], exits.USAGE, "SystemExit"),
        # an API server whose handshake and answer come a byte at a time: ended by the
        # call's deadline (10 s), not hanging; one that answers '{}': exit 3, not 70
        Named("k8s-slow-tls", [*k8s, "--kubeconfig", str(_kubeconfig(tmp, servers["drip"],
              "drip"))], exits.UNKNOWN, "did not answer within", with_config),
        Named("k8s-answers-empty-object", [*k8s, "--kubeconfig",
              str(_kubeconfig(tmp, servers["empty"], "empty"))], exits.UNKNOWN,
              "cannot parse", with_config),
        Named("pagerduty-slow-tls", ["page", "trigger", "--routing-key-file", str(key),
              "--events-url", servers["drip"].url, "--ca-file", str(servers["drip"].cert),
              "--timeout", "2", "--max-retries", "1", "--summary", "s", "--execute"],
              exits.UNKNOWN, "PagerDuty"),
        # a valid 249-character topic with its partitions: the limit is the topic's
        Named("topic-249-with-partitions", ["offsets", "reset", "-g", "g", "--topic",
              f"{long_topic}:0", "--to-earliest", *b], exits.UNKNOWN, "cannot reach Kafka"),
        Named("topic-250-with-partitions", ["offsets", "reset", "-g", "g", "--topic",
              f"{long_topic}t:0", "--to-earliest", *b], exits.USAGE, "249"),
        # a digit Python's isdigit() takes but int() does not
        Named("broker-id-superscript", ["reassign", "plan", "--add-brokers", "\u00b2", *b],
              exits.USAGE, "broker ids"),
        Named("bootstrap-open-bracket", ["reassign", "cancel", "-b", "[::1", "--timeout", "0.5"],
              exits.USAGE, "host:port"),
        Named("bootstrap-ipv6-unbracketed", ["lag", "-g", "g", "-b", "::1:9092"],
              exits.USAGE, "brackets"),
        # Kubernetes names are DNS labels: a trailing newline passed `re.match(...$)`
        Named("k8s-namespace-newline", ["playbook", "cronjob", "--namespace", "kafka\n",
              "--statefulset", "kafka", "--image", "i", "--schedule", "0 2 * * *",
              "--window", "02:00-05:00Z"], exits.USAGE, "Kubernetes name"),
        Named("k8s-statefulset-upper", ["playbook", "scale-out", "--platform", "kubernetes",
              "--namespace", "kafka", "--statefulset", "Kafka", "--context", "c"],
              exits.USAGE, "Kubernetes name"),
        Named("k8s-replay-namespace-newline", ["replay", "-g", "g", "-t", "t",
              "--k8s-namespace", "a\n", *b], exits.USAGE, "Kubernetes name"),
        Named("k8s-config-secret", ["playbook", "cronjob", "--namespace", "kafka",
              "--statefulset", "kafka", "--image", "i", "--schedule", "0 2 * * *",
              "--window", "02:00-05:00Z", "--config-secret", "a_b"], exits.USAGE,
              "Kubernetes name"),
    ]


def _run_named(named: list[Named], tmp: Path) -> list[str]:
    cases = [Case(n.argv[0], n.kind, n.argv, n.code != exits.OK, n.env) for n in named]
    results = run_cases(cases, tmp, timeout=300)
    bad = []
    for n, case, res in zip(named, cases, results, strict=True):
        found = problems(case, res)
        if res["code"] != n.code:
            found.append(f"exit {res['code']}, expected {n.code}")
        shown = res["err"] if n.code != exits.OK else res["out"]
        if n.says and n.says not in shown:
            found.append(f"does not say {n.says!r}")
        bad += [f"[{n.kind}] {p}; stderr={res['err'][-300:]!r}" for p in found]
    return bad


@pytest.mark.timeout(600)
def test_named_bad_inputs(tmp_path: Path) -> None:
    (tmp_path / "drip").mkdir()
    (tmp_path / "empty").mkdir()
    with TlsServer(tmp_path / "drip", "drip") as drip, \
            TlsServer(tmp_path / "empty", "empty") as empty:
        bad = _run_named(_named_cases(tmp_path, {"drip": drip, "empty": empty}), tmp_path)
    assert not bad, "\n".join(bad)
    # refused before anything was written
    assert list((tmp_path / "shapes" / "out").iterdir()) == []
    assert Path(tmp_path / "shapes" / "state-file").is_file()


def _with_stdout(args: list[str], tmp: Path, stdout: int | None) -> subprocess.CompletedProcess[str]:
    """``opskit ARGS`` as a user's shell runs it, fd 1 being ``stdout`` (None: closed)."""
    def close_stdout() -> None:
        os.close(1)

    return subprocess.run([sys.executable, "-m", "opskit.cli.main", *args], text=True,
                          stdout=stdout if stdout is not None else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=_env(tmp), cwd=tmp, timeout=120,
                          preexec_fn=close_stdout if stdout is None else None, check=False)


@pytest.mark.timeout(300)
def test_stdout_closed_or_broken(tmp_path: Path) -> None:
    """``opskit lag ... >&-``, ``1<&0`` and a reader that went away: one line, exit 8,
    never a traceback or click's silent exit 1."""
    lag = ["lag", "-g", "g", "-b", UNREACHABLE, "--timeout", "0.5"]
    read_only = os.open(os.devnull, os.O_RDONLY)
    reader, writer = os.pipe()
    os.close(reader)  # the reader went away before opskit wrote (`opskit ... | true`)
    try:
        runs = {"closed": _with_stdout(lag, tmp_path, None),
                "read-only": _with_stdout(["context", "list"], tmp_path, read_only),
                "broken-pipe": _with_stdout(["acls", "monitor-principal", "x"], tmp_path, writer),
                "broken-pipe-json": _with_stdout(["acls", "monitor-principal", "x", "-o", "json"],
                                                 tmp_path, writer),
                # typer's rich help meets EPIPE in rich's console (`opskit --help | head -1`)
                "broken-pipe-help": _with_stdout(["--help"], tmp_path, writer),
                "broken-pipe-command-help": _with_stdout(["reassign", "plan", "--help"],
                                                         tmp_path, writer)}
    finally:
        os.close(read_only)
        os.close(writer)
    for kind, r in runs.items():
        lines = r.stderr.splitlines()
        assert r.returncode == exits.WRITE_FAILED, (kind, r.returncode, r.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("opskit: error: standard output"), \
            (kind, r.stderr[-2000:])
