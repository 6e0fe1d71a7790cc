"""Every connecting command against brokers that misbehave: it ends, with one line.

A fault-injecting proxy (tests/broker_double.py) in front of the real Kafka 3.7
broker advertises APIs and then closes the connection on them (the Hanzo gateway
and Heraclitus do this), stalls (answers ApiVersions, then nothing; or accepts and
never answers anything), answers slowly, answers garbage, cuts answers short, or
answers with the wrong correlation id. Each command runs as its own process with
``--timeout 2``; a process still running after the bound is a hang (killed, and
the test fails). No speed is asserted, only that it ends, with a documented exit
code, no traceback, and at most one ``opskit: error:`` line (exactly one when it
failed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from broker_double import ALL_APIS, API_VERSIONS, Behaviour, BrokerDouble
from helpers import commit, create_topic, produce

TIMEOUT = 2.0
#: a command may wait --timeout a few times in a row (probe, first try, fallback; about
#: 5 s in all here when the machine is idle), and a shared CI machine can be many times
#: slower (load 30 on 2 cores made them 17-20 s): a hang never ends, so the bound is wide
BOUND_S = 15 * TIMEOUT + 30
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6}

FAULTS: dict[str, Behaviour] = {
    "close-after-versions": Behaviour(close_on=ALL_APIS),
    "stall-after-versions": Behaviour(stall_on=ALL_APIS),
    "stall-everything": Behaviour(stall_all=True),
    "slow": Behaviour(delay_s=1.5),
    "garbage": Behaviour(garbage_on=ALL_APIS | {API_VERSIONS}),
    "truncated": Behaviour(truncate_on=ALL_APIS),
    "wrong-correlation-id": Behaviour(wrong_cid_on=ALL_APIS),
}


@dataclass(frozen=True)
class Scenario:
    bootstrap: str
    topic: str
    group: str
    registry: Path
    tmp: Path


@pytest.fixture(scope="module")
def scenario(kafka, tmp_path_factory: pytest.TempPathFactory) -> Scenario:  # type: ignore[no-untyped-def]
    u = uuid.uuid4().hex[:8]
    topic, group = f"fault_{u}", f"fault-g-{u}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: 5, 1: 5})
    commit(kafka.bootstrap, group, {(topic, 0): 2, (topic, 1): 3})
    tmp = tmp_path_factory.mktemp("faults")
    reg = tmp / "registry.yaml"
    reg.write_text(f"defaults:\n  replication_factor: 1\ntopics:\n  - name: {topic}\n"
                   "    partitions: 2\n    retention: 7d\n")
    return Scenario(kafka.bootstrap, topic, group, reg, tmp)


def commands(s: Scenario) -> dict[str, list[str]]:
    return {
        "lag": ["lag", "-g", s.group],
        "lag --no-time": ["lag", "-g", s.group, "--no-time", "-o", "json"],
        "lag --all-groups": ["lag", "--all-groups", "--no-time"],
        "lag --window": ["lag", "-g", s.group, "--no-time", "--window", "2s", "--interval", "1s"],
        "health": ["health", "--expected-brokers", "1"],
        "throughput": ["throughput", "--interval", "1s", "-t", s.topic],
        "snapshot": ["snapshot", "--no-time", "-o", "json"],
        "topics diff": ["topics", "diff", str(s.registry)],
        "offsets reset (dry run)": ["offsets", "reset", "--group", s.group, "--topic", s.topic,
                                    "--to-earliest"],
        "offsets export": ["offsets", "export", "--group", s.group],
        "exporter --once": ["exporter", "--once"],
        "dr snapshot": ["dr", "snapshot", "--file", str(s.tmp / f"dr-{uuid.uuid4().hex}.json")],
    }


@dataclass(frozen=True)
class Run:
    command: str
    code: int | None  # None: killed after the bound (a hang)
    seconds: float
    err: str


def _run(argv: list[str], bootstrap: str, env: dict[str, str]) -> tuple[int | None, float, str]:
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "opskit.cli.main", *argv, "-b", bootstrap,
                            "--timeout", f"{TIMEOUT:g}"], check=False, capture_output=True,
                           text=True, timeout=BOUND_S, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, time.monotonic() - t0, err
    return p.returncode, time.monotonic() - t0, p.stderr


def problems(run: Run) -> list[str]:
    """What is wrong with a run (empty: it ended as promised)."""
    out: list[str] = []
    if run.code is None:
        return [f"hang: still running after {BOUND_S:g}s"]
    if run.code < 0:
        out.append(f"killed by signal {-run.code}")
    elif run.code not in DOCUMENTED:
        out.append(f"exit {run.code} is not a documented code")
    if "Traceback" in run.err:
        out.append("traceback on stderr")
    errors = [ln for ln in run.err.splitlines() if ln.startswith("opskit: error:")]
    if len(errors) > 1:
        out.append(f"{len(errors)} error lines")
    if run.code not in (0, 1, 2, None) and run.code >= 0 and len(errors) != 1 \
            and not run.command.startswith(("health", "lag", "offsets reset")):
        out.append(f"exit {run.code} without its one-line error")
    return out


@pytest.fixture(scope="module", params=sorted(FAULTS))
def faulty(request: pytest.FixtureRequest, scenario: Scenario) -> Iterator[tuple[str, BrokerDouble]]:
    with BrokerDouble(scenario.bootstrap, FAULTS[request.param]) as d:
        yield request.param, d


@pytest.mark.timeout(600)
def test_every_command_ends_with_one_line(faulty: tuple[str, BrokerDouble], scenario: Scenario,
                                          tmp_path: Path) -> None:
    fault, double = faulty
    env = dict(os.environ, OPSKIT_CONFIG=str(tmp_path / "config.yaml"),
               OPSKIT_STATE=str(tmp_path / "state"), PYTHONWARNINGS="ignore")
    cmds = commands(scenario)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futs = {name: pool.submit(_run, argv, double.bootstrap, env) for name, argv in cmds.items()}
        runs = [Run(name, *f.result()) for name, f in futs.items()]
    report = "\n".join(f"  {r.command:<24} exit {r.code!s:>4} {r.seconds:5.1f}s  "
                       f"{(r.err.strip().splitlines() or [''])[-1][:150]}" for r in runs)
    print(f"\n{fault}:\n{report}")
    bad = {r.command: problems(r) for r in runs if problems(r)}
    assert not bad, f"{fault}: {bad}\n{report}"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """An HTTP-only server where a Kafka broker is expected (StreamNest speaks HTTP)."""
    import http.server
    import threading

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.timeout(300)
def test_an_http_server_is_named_as_not_kafka(http_server: str, tmp_path: Path) -> None:
    env = dict(os.environ, OPSKIT_CONFIG=str(tmp_path / "config.yaml"),
               OPSKIT_STATE=str(tmp_path / "state"), PYTHONWARNINGS="ignore")
    cmds = {"lag": ["lag", "-g", "g"], "health": ["health"],
            "offsets export": ["offsets", "export", "--group", "g"]}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futs = {n: pool.submit(_run, argv, http_server, env) for n, argv in cmds.items()}
        runs = [Run(n, *f.result()) for n, f in futs.items()]
    for r in runs:
        assert not problems(r), (r.command, problems(r), r.err)
        assert r.code == 3, (r.command, r.code)
        [line] = [ln for ln in r.err.splitlines() if ln.startswith("opskit: error:")]
        assert "answers HTTP, not the Kafka protocol" in line, (r.command, line)


def test_gateway_double_answers_like_the_gateway(scenario: Scenario) -> None:
    """The double's fidelity where opskit relies on it: the gateway's 14 APIs only, nothing
    for a whole-group OffsetFetch, the offsets for one that names the partitions."""
    from broker_double import HANZO_APIS, hanzo_gateway

    from opskit.adapters.kafka import capabilities
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.core.connection import ConnectionConfig
    from opskit.core.models import TopicPartition

    with BrokerDouble(scenario.bootstrap, hanzo_gateway()) as d:
        conn = ConnectionConfig(d.bootstrap)
        assert set(capabilities.probe(conn, 3.0).apis) == set(HANZO_APIS)
        admin = KafkaAdmin(conn, timeout=5)
        assert admin.committed_offsets([scenario.group]) == {scenario.group: {}}
        named = [TopicPartition(scenario.topic, p) for p in (0, 1)]
        assert admin.committed_offsets([scenario.group], named) == {
            scenario.group: {named[0]: 2, named[1]: 3}}
