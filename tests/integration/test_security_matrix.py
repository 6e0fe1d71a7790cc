"""The security matrix: opskit's commands x {PLAINTEXT, SASL_PLAINTEXT, SASL_SSL} x
{admin, monitor}, each cell run against a real Kafka 3.7 broker (one 1-node cluster per
protocol, shared with the session).

``admin`` is the sandbox's super user; ``monitor`` holds what a HIP-30 monitor holds
(``tests/secured_scenario.py``): Describe on the cluster, on the scenario's topic and on
its groups, no Read, no DescribeConfigs. On PLAINTEXT there are no principals (no
authentication, no authorizer): only the admin column runs.

Each cell is classified:

* **works**: exit code and numbers checked (the monitor's against the admin's run);
* **degrades**: the numbers that are given are checked, and what is left out is said
  (a ``note:`` line, an UNKNOWN finding naming the ACL, or a series left out);
* **refused N**: exit N with one line ``opskit: error: ...`` naming the missing ACL, no
  traceback, nothing changed.

``EXPECTED`` is the one place the cells live. With ``OPSKIT_WRITE_SECURITY_MATRIX=1`` a
complete run writes docs/security-matrix.md from the observed cells;
``test_doc_matches_expected`` keeps the doc's table equal to ``EXPECTED``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import MATRIX_BEGIN, MATRIX_END, CliResult, check_matrix_doc, run_cli
from prometheus_client.parser import text_string_to_metric_families
from secured_scenario import COMMITTED, PARTITIONS, RECORDS, Scenario, build

DOC = Path(__file__).resolve().parents[2] / "docs" / "security-matrix.md"
WRITE_ENV = "OPSKIT_WRITE_SECURITY_MATRIX"
PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")
ROLES = ("admin", "monitor")
FIXTURE = {"PLAINTEXT": "kafka", "SASL_PLAINTEXT": "kafka_sasl_plaintext", "SASL_SSL": "kafka_sasl_ssl"}
WORKS, DEGRADES, NA = "works", "degrades", "n/a"

COMMANDS = (
    "lag -g G",
    "lag --all-groups",
    "health",
    "throughput",
    "snapshot",
    "topics diff",
    "acls diff",
    "offsets reset (dry run)",
    "offsets reset --execute",
    "dr snapshot",
    "dr restore (dry run)",
    "exporter --once",
)

_MONITOR: dict[str, str] = {
    "lag -g G": DEGRADES,  # lag in time omitted (no Read), numbers exact
    "lag --all-groups": DEGRADES,  # + groups it may not describe left out, named
    "health": DEGRADES,  # min.insync.replicas unknown (no DescribeConfigs), said
    "throughput": DEGRADES,  # groups it may not describe left out, named
    "snapshot": DEGRADES,
    "topics diff": DEGRADES,  # config drift not judged, said; partitions judged
    "acls diff": WORKS,  # Describe on the cluster is enough
    "offsets reset (dry run)": WORKS,
    "offsets reset --execute": "refused 6",  # needs Read on the group and topic
    "dr snapshot": "refused 6",  # needs Read to record the next records' timestamps
    "dr restore (dry run)": "refused 6",  # needs DescribeConfigs (topic overrides)
    "exporter --once": DEGRADES,  # lag seconds series left out, never 0
}
EXPECTED: dict[tuple[str, str, str], str] = {}
for _cmd in COMMANDS:
    for _p in PROTOCOLS:
        EXPECTED[(_cmd, _p, "admin")] = WORKS
        EXPECTED[(_cmd, _p, "monitor")] = NA if _p == "PLAINTEXT" else _MONITOR[_cmd]
EXPECTED[("acls diff", "PLAINTEXT", "admin")] = "refused 6"  # the broker has no authorizer

OBSERVED: dict[tuple[str, str, str], tuple[str, str]] = {}
_SCENARIOS: dict[str, Scenario] = {}
_ADMIN_RUNS: dict[tuple[str, str], Any] = {}


@pytest.fixture(params=PROTOCOLS)
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    proto = request.param
    if proto not in _SCENARIOS:
        cluster = request.getfixturevalue(FIXTURE[proto])
        _SCENARIOS[proto] = build(cluster, tmp_path_factory.mktemp(f"sec-{proto.lower()}"))
    return _SCENARIOS[proto]


# --------------------------------------------------------------------------- verification

def _lag_group(data: dict[str, Any], s: Scenario) -> dict[str, Any]:
    [g] = [g for g in data["groups"] if g["group"] == s.group]
    assert g["total_lag"] == s.total_lag, g["total_lag"]
    parts = {p["partition"]: p for p in g["partitions"] if p["topic"] == s.topic}
    assert sorted(parts) == list(range(PARTITIONS))
    for p in parts.values():
        assert (p["committed_offset"], p["log_end_offset"], p["lag"]) == (COMMITTED, RECORDS,
                                                                          RECORDS - COMMITTED)
    return g


def _lag_times(g: dict[str, Any]) -> set[str]:
    return {p["lag_time_basis"] for p in g["partitions"]}


def _v_lag(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    assert r.code == 0, r.code
    g = _lag_group(r.json(), s)
    if role == "admin":
        assert _lag_times(g) == {"committed_record"}, _lag_times(g)
        return WORKS
    assert _lag_times(g) == {"read_denied"} and all(p["lag_seconds"] is None for p in g["partitions"])
    assert "no Read ACL" in r.err
    return DEGRADES


def _v_health(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    d = r.json()
    names = {p["topic"] for f in d["findings"] for p in f.get("partitions", [])}
    assert d["counts"]["partitions"] >= PARTITIONS and not names - set(admin_topics(s)), names
    if role == "admin":
        assert r.code in (0, 1), r.code
        assert all("not readable" not in f["message"] for f in d["findings"])
        return WORKS
    # no DescribeConfigs: whether a topic has fewer replicas than its min.insync.replicas
    # cannot be known: UNKNOWN and exit 3, never OK
    above = next(f for f in d["findings"] if f["check"] == "min_isr_above_rf")
    assert above["severity"] == "UNKNOWN" and "DescribeConfigs" in above["message"], above
    assert r.code == 3, r.code
    # the monitor sees the topics it may describe (its scenario's, not the internal ones)
    with s.cluster.admin() as a:
        every = sum(len(ps) for ps in a.metadata().topics.values())
    assert PARTITIONS <= d["counts"]["partitions"] < every, (d["counts"], every)
    assert any("DescribeConfigs" in f["message"] for f in d["findings"])
    return DEGRADES


def admin_topics(s: Scenario) -> list[str]:
    with s.cluster.admin() as a:
        return list(a.metadata().topics)


def _v_throughput(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    assert r.code == 0, r.code
    d = r.json()
    [t] = [t for t in d["topics"] if t["topic"] == s.topic]
    assert t["partitions"] == PARTITIONS and t["messages"] == 0
    assert any(g["group"] == s.group for g in d["groups"])
    return DEGRADES if "note:" in r.err else WORKS


def _v_snapshot(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    assert r.code == 0, r.code
    _lag_group(r.json(), s)
    return DEGRADES if r.json()["notes"] else WORKS


def _v_topics_diff(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    # the scenario's topic is as registered; other tests' topics are "unregistered" (exit 1)
    d = r.json()
    assert r.code == (0 if d["in_sync"] else 1), r.code
    assert [c for c in d["changes"] if c["topic"] == s.topic] == [], d["changes"]
    assert all(c["kind"] == "unregistered" for c in d["changes"]), d["changes"]
    return DEGRADES if d["notes"] else WORKS


def _v_acls_diff(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    if not s.cluster.secured:  # no authorizer: said in one line, exit 6
        assert r.code == 6 and "no authorizer" in r.err, (r.code, r.err)
        return "refused 6"
    assert r.code == 0 and r.json()["in_sync"] is True, (r.code, r.out[:300])
    return WORKS


def _v_reset_dry(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    assert r.code == 0, r.code
    [plan] = r.json()["groups"]
    rows = {(x["partition"], x["current_offset"], x["target_offset"]) for x in plan["rows"]}
    assert rows == {(p, 5, 0) for p in range(PARTITIONS)}, rows
    return WORKS


def _committed(s: Scenario, group: str) -> dict[int, int]:
    with s.cluster.admin() as a:
        return {tp.partition: o for tp, o in a.committed_offsets([group])[group].items()}


def _v_reset_exec(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    group = s.reset_group_admin if role == "admin" else s.reset_group_monitor
    after = _committed(s, group)
    if r.code == 0:
        assert after == dict.fromkeys(range(PARTITIONS), 0), after
        return WORKS
    assert after == dict.fromkeys(range(PARTITIONS), 5), after  # nothing committed
    assert "refused before any change" in r.err and "lacks Read on group" in r.err
    assert "KafkaError{" not in r.err
    return f"refused {r.code}"


def _v_dr_snapshot(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    assert r.code == 0, r.code
    d = r.json()
    positions = {p["partition"]: p for p in d["groups"][s.group]}
    assert {p: x["offset"] for p, x in positions.items()} == dict.fromkeys(range(PARTITIONS), COMMITTED)
    assert all(x["record_timestamp_ms"] is not None for x in positions.values())
    return WORKS


def _v_dr_restore(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    assert r.code == 0, r.code
    d = r.json()
    [g] = [g for g in d["groups"] if g["group"] == s.group]
    offsets = {o["partition"]: o["offset"] for o in g["offsets"]}
    # the first record at or after the recorded timestamp: records sharing it (produced in
    # the same millisecond) are read again, never skipped
    assert sorted(offsets) == list(range(PARTITIONS)) and all(
        0 <= o <= COMMITTED for o in offsets.values()), offsets
    assert d["create_topics"] == [] and d["create_acls"] == []
    return WORKS


def _metrics(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            out.setdefault(smp.name, {})[tuple(sorted(smp.labels.items()))] = smp.value
    return out


def _v_exporter(s: Scenario, r: CliResult, role: str, admin: Any) -> str:
    # a family the principal may not read (topic configs without DescribeConfigs) makes
    # --once exit 3 naming it; the lag families must still be complete
    assert r.code == 0 or (role == "monitor" and r.code == 3), r.code
    m = _metrics(r.out)
    if r.code == 3:
        assert "collection incomplete" in r.err and "groups could not" not in r.err \
            and "offsets could not" not in r.err, r.err
        assert m["opskit_kafka_up"][()] == 1

    def mine(name: str) -> dict[int, float]:
        return {int(dict(k)["partition"]): v for k, v in m.get(name, {}).items()
                if dict(k).get("consumergroup") == s.group}

    assert mine("kafka_consumergroup_lag") == dict.fromkeys(range(PARTITIONS), RECORDS - COMMITTED)
    secs = mine("opskit_consumergroup_lag_seconds")
    if role == "admin":
        assert sorted(secs) == list(range(PARTITIONS)) and all(v > 0 for v in secs.values()), secs
        return WORKS
    assert secs == {}, secs  # left out: never 0 for a lagging partition
    return DEGRADES


Verify = Callable[[Scenario, CliResult, str, Any], str]


def _args(s: Scenario, cmd: str, role: str, tmp: Path) -> tuple[list[str], Verify]:
    if cmd == "lag -g G":
        return ["lag", "-g", s.group, "-o", "json"], _v_lag
    if cmd == "lag --all-groups":
        return ["lag", "--all-groups", "-o", "json"], _v_lag
    if cmd == "health":
        return ["health", "-o", "json"], _v_health
    if cmd == "throughput":
        return ["throughput", "--interval", "1s", "-o", "json"], _v_throughput
    if cmd == "snapshot":
        return ["snapshot", "-o", "json"], _v_snapshot
    if cmd == "topics diff":
        return ["topics", "diff", str(s.registry), "-o", "json"], _v_topics_diff
    if cmd == "acls diff":
        return ["acls", "diff", str(s.registry), "-o", "json"], _v_acls_diff
    group = s.reset_group_admin if role == "admin" else s.reset_group_monitor
    reset = ["offsets", "reset", "-g", group, "-t", s.topic, "--to-earliest", "-o", "json",
             "--backup-dir", str(tmp / "backups")]
    if cmd == "offsets reset (dry run)":
        return reset, _v_reset_dry
    if cmd == "offsets reset --execute":
        return [*reset, "--execute", "--yes"], _v_reset_exec
    if cmd == "dr snapshot":
        return ["dr", "snapshot", "-t", s.topic, "-g", s.group, "-o", "json"], _v_dr_snapshot
    if cmd == "dr restore (dry run)":
        snap = tmp / "snap.json"
        done = run_cli("dr", "snapshot", "-t", s.topic, "-g", s.group, "--file", str(snap),
                       *s.args("admin"))
        assert done.code == 0, done.err
        return ["dr", "restore", str(snap), "-o", "json"], _v_dr_restore
    assert cmd == "exporter --once"
    return ["exporter", "--once"], _v_exporter


def classify(r: CliResult, verify: Callable[[], str]) -> tuple[str, str]:
    err_lines = [ln for ln in r.err.splitlines() if ln.strip()]
    if "Traceback" in r.err or r.code == 70:
        return "fails", f"exit {r.code}: {err_lines[-1] if err_lines else 'traceback'}"
    errors = [ln for ln in err_lines if ln.startswith("opskit: error:")]
    try:
        cell = verify()
    except (AssertionError, KeyError, ValueError, TypeError) as e:
        if errors and len(errors) == 1 and r.code not in (0, 1, 70) and not r.out.strip():
            return f"refused {r.code}", errors[0]
        return "fails", f"exit {r.code}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    notes = [ln for ln in err_lines if ln.startswith("note:")]
    if cell.startswith("refused") and errors:
        return cell, errors[0]
    return cell, (notes[0] if notes and cell == DEGRADES else f"exit {r.code}")


def _sanitize(text: str, s: Scenario) -> str:
    for old, new in ((s.reset_group_admin, "<group>"), (s.reset_group_monitor, "<group>"),
                     (s.hidden_group, "<hidden-group>"),
                     (s.group, "<group>"), (s.topic, "<topic>"), (s.service, "<service>")):
        text = text.replace(old, new)
    text = re.sub(r"127\.0\.0\.1:\d+", "<broker>", text)
    return re.sub(r"\d+ group\(s\)[^:]*: .*", "N group(s) it may not describe: ...", text)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("command", COMMANDS)
def test_cell(scenario: Scenario, command: str, role: str, tmp_path: Path) -> None:
    proto = next(p for p, sc in _SCENARIOS.items() if sc is scenario)
    want = EXPECTED[(command, proto, role)]
    if want == NA:
        OBSERVED[(command, proto, role)] = (NA, "no principals on PLAINTEXT")
        pytest.skip("PLAINTEXT has no principals: every client is the same anonymous user")
    argv, verify = _args(scenario, command, role, tmp_path)
    t0 = time.monotonic()
    r = run_cli(*argv, *scenario.args(role), "--timeout", "10")
    seconds = time.monotonic() - t0
    cell, detail = classify(r, lambda: verify(scenario, r, role, None))
    OBSERVED[(command, proto, role)] = (cell, f"{_sanitize(detail, scenario)} ({seconds:.1f} s)")
    assert cell == want, f"{command} {proto} {role}: expected {want}, got {cell}: {detail}"


# --------------------------------------------------------------------------- the document



def render_table(cells: dict[tuple[str, str, str], str]) -> str:
    cols = [(p, r) for p in PROTOCOLS for r in ROLES]
    lines = ["| command | " + " | ".join(f"{p} {r}" for p, r in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for cmd in COMMANDS:
        lines.append(f"| `{cmd}` | " + " | ".join(cells[(cmd, p, r)] for p, r in cols) + " |")
    return "\n".join(lines)


def write_doc(observed: dict[tuple[str, str, str], tuple[str, str]]) -> None:
    details = "\n".join(
        f"| `{cmd}` | {p} | {r} | {observed[(cmd, p, r)][0]} | "
        f"{observed[(cmd, p, r)][1].replace('|', '/')} |"
        for cmd in COMMANDS for p in PROTOCOLS for r in ROLES)
    DOC.write_text(f"""# Security matrix (command x protocol x principal)

Generated by `tests/integration/test_security_matrix.py` with
`{WRITE_ENV}=1 python -m pytest tests/integration/test_security_matrix.py`; do not
edit by hand. One 1-node Kafka 3.7.2 cluster per protocol (`opskit sandbox up
--security ...`: StandardAuthorizer, `allow.everyone.if.no.acl.found=false`, SASL PLAIN,
TLS 1.3 with a generated CA for SASL_SSL). Scenario: topic T (4 partitions, 10 records
each), group G committed at 3 on each (lag 7 per partition, 28 in all), two more groups
committed at 5 for `offsets reset`, a registry file with T, the groups and one service
principal with its ACL.

- **admin**: the sandbox's super user.
- **monitor**: a HIP-30 monitor: Describe on the cluster, on T and on the groups; no Read
  (HIP-30 lets no monitor consume events), no DescribeConfigs. Its numbers are checked
  against the admin's run.
- **works**: exit code and numbers checked. **degrades**: the numbers given are checked and
  what is left out is said (`note:` line, UNKNOWN finding naming the ACL, or the lag
  seconds series left out -- never 0). **refused N**: exit N with one line naming the
  missing ACL, nothing changed. **n/a**: PLAINTEXT has no principals.

What each command needs is in the README ("ACLs each command needs") and
`opskit acls monitor-principal NAME`.

{MATRIX_BEGIN}
{render_table(EXPECTED)}
{MATRIX_END}

## Observed in the last run

| command | protocol | principal | cell | detail |
|---|---|---|---|---|
{details}
""")


def test_doc_matches_expected() -> None:
    """docs/security-matrix.md shows exactly the EXPECTED cells (defined last: runs after
    the cells; with OPSKIT_WRITE_SECURITY_MATRIX=1 it first rewrites the doc)."""
    check_matrix_doc(DOC, render_table(EXPECTED), WRITE_ENV, __file__,
                     lambda: [k for k in EXPECTED if k not in OBSERVED],
                     lambda: write_doc(OBSERVED))


def test_expected_covers_every_cell() -> None:
    assert set(EXPECTED) == {(c, p, r) for c in COMMANDS for p in PROTOCOLS for r in ROLES}
    assert json.dumps(sorted(set(EXPECTED.values()))) != "[]"
