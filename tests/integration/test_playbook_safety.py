"""The scale-out playbook's refusals, paging and run lock, on a secured sandbox.

One Kafka 3.7 SASL_SSL sandbox (one node, a little data) serves the whole scenario,
to keep CI short: every refusal first (one line, exit 5, nothing changed), a halted
run paging the local PagerDuty receiver, then a real scale-out to three brokers
during which a second run is refused by the run lock, and the secured end state (the
new nodes carry the TLS listener, SASL, the authorizer and its super users).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from helpers import cli_sandbox, create_topic, run_cli
from pd_receiver import PagerDutyReceiver, routing_key

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.sandbox.cluster import Sandbox

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "opskit" / "registry" / "hip30.yaml"


@pytest.fixture
def secured(uniq: str) -> Iterator[Sandbox]:
    with cli_sandbox(f"ps{uniq}", "--kafka-version", "3.7", "--security", "sasl_ssl") as sb:
        yield sb


def journal_path(sb: Sandbox) -> Path:
    return sb.playbook_dir / "journal.json"


def journal(sb: Sandbox) -> dict[str, object]:
    try:
        return json.loads(journal_path(sb).read_text())["state"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return {}


def refused(r: object, *words: str, progress: bool = False) -> None:
    """Exit 5 and one ``opskit: error:`` line naming ``words``; nothing else on stderr
    unless the run had started (``progress``: its step and paging lines come first)."""
    code, err = r.code, r.err  # type: ignore[attr-defined]
    assert code == 5, err
    lines = err.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("opskit: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert progress or len(lines) == 1, err
    for w in words:
        assert w in errors[0], (w, err)


@pytest.mark.timeout(1800)  # a whole scale-out with 3 restarts: 450-470 s at load 1-3, past
# 600 s at load 15-25 (the run's own waits bound it, each with its deadline)
def test_refusals_paging_lock_and_secured_scale_out(secured: Sandbox, tmp_path: Path) -> None:
    sb = secured
    conf = sb.connection().to_librdkafka()
    create_topic(conf, "llm_usage", 4)
    p = Producer(conf)
    for i in range(200):
        p.produce("llm_usage", key=f"k{i % 8}".encode(), value=str(i).encode())
    assert p.flush(60) == 0
    scale = ["playbook", "scale-out", "--sandbox", sb.name]

    # 1. a plan that would change the static voter set: the reason and the fix, nothing done
    r = run_cli(*scale, "--controllers", "3", "--execute")
    refused(r, "static controller voter set", "opskit playbook upgrade-quorum")
    assert not journal_path(sb).exists() and len(sb.require().nodes) == 1

    # 2. a topic whose min.insync.replicas (2) is above its RF (1) is no refusal: Kafka caps
    # the requirement at the replica count, so acks=all writes are taken (a WARNING, see
    # test_min_isr_judgement.py), and raising RF is the remedy: the plan goes ahead. The
    # refusal of an unhealthy preflight (a CRITICAL check) is tested in
    # tests/unit/test_scaleout_core.py; a one-node cluster cannot be made CRITICAL cheaply.
    create_topic(conf, "thin", 1, config={"min.insync.replicas": "2"})
    r = run_cli(*scale)
    assert r.code == 0, r.err
    assert "not healthy" not in r.out + r.err
    assert not journal_path(sb).exists() and len(sb.require().nodes) == 1
    cleaner = AdminClient(conf)          # kept referenced while its futures run
    for f in cleaner.delete_topics(["thin"]).values():
        f.result(30)

    # bad input: usage errors (exit 2), nothing done
    assert run_cli(*scale, "--window", "25:00-01:00", "--execute").code == 2
    assert run_cli(*scale, "--controllers", "0").code == 2
    assert not journal_path(sb).exists()

    # 3. the quorum upgrade needs Kafka 4.1+
    r = run_cli("playbook", "upgrade-quorum", "--sandbox", sb.name, "--execute")
    refused(r, "4.1")

    # 4. a closed window: halts before any change and pages why (no secret in the page)
    key = routing_key()
    keyf = tmp_path / "routing-key"
    keyf.write_text(key)
    start = (time.gmtime().tm_hour + 2) % 24
    closed = f"{start:02d}:00-{(start + 1) % 24:02d}:00Z"
    with PagerDutyReceiver() as pd:
        r = run_cli(*scale, "--window", closed, "--routing-key-file", str(keyf),
                    "--pagerduty-url", pd.url, "--pagerduty-ca-file", str(pd.ca_file),
                    "--execute")
        refused(r, "maintenance window", progress=True)
        assert pd.wait_for(lambda evs: len(evs) >= 1, timeout=30)
        (event,) = pd.events
    assert event["routing_key"] == key and event["event_action"] == "trigger"
    assert "maintenance window" in event["payload"]["summary"]
    assert event["payload"]["severity"] == "warning"
    without_key = json.dumps({k: v for k, v in event.items() if k != "routing_key"})
    secrets = [key, *(sb.security(sb.require()).password(u) for u in ("admin", "monitor"))]
    for s in secrets:
        assert s not in without_key and s not in r.out + r.err
    assert len(sb.require().nodes) == 1 and journal(sb)["done"] == []

    # 5. the next run (no window) resumes that run; a second run while it is active is
    # refused by the run lock, naming the holder. Its registry file cannot be rewritten
    # (the kernel refuses the name of the temporary file beside it: too long, whoever
    # runs the test, root included), so update_registry fails for good: the run pages
    # (critical, naming the step, no secret) and exits 5; resumed with a registry it can
    # write, it finishes
    bad_registry = tmp_path / ("r" * 246 + ".yaml")         # 251 bytes: the name's limit is 255
    bad_registry.write_bytes(REGISTRY.read_bytes())
    with PagerDutyReceiver() as pd:
        proc = subprocess.Popen(
            [sys.executable, "-m", "opskit.cli.main", *scale, "--throttle", "20MiB",
             "--registry", str(bad_registry), "--routing-key-file", str(keyf),
             "--pagerduty-url", pd.url, "--pagerduty-ca-file", str(pd.ca_file), "--execute"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=os.environ.copy())
        try:
            deadline = time.monotonic() + 120
            while journal(sb).get("phase") != "running":
                assert proc.poll() is None and time.monotonic() < deadline, "never ran"
                time.sleep(0.2)
            # adding a node alone takes longer than these three commands
            for second in (run_cli(*scale, "--execute"),
                           run_cli("playbook", "resume", "--sandbox", sb.name),
                           run_cli("playbook", "upgrade-quorum", "--sandbox", sb.name,
                                   "--execute")):
                refused(second, "another run is active", f"pid {proc.pid}")
            assert proc.poll() is None
            _, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        assert proc.returncode == 5, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("opskit: error:") and "failed: update_registry" in last, err
        assert "cannot write registry file" in last and "fix the cause" in last, err
        assert pd.wait_for(lambda evs: len(evs) >= 1, timeout=30)
        (failed_page,) = pd.events
    assert failed_page["routing_key"] == key and failed_page["event_action"] == "trigger"
    summary = failed_page["payload"]["summary"]
    assert summary.startswith(f"scale-out {journal(sb)['run_id']} failed at update_registry: "
                              "cannot write registry file"), summary
    assert failed_page["payload"]["severity"] == "critical"
    without_key = json.dumps({k: v for k, v in failed_page.items() if k != "routing_key"})
    for s in secrets:
        assert s not in without_key and s not in err
    state = journal(sb)
    assert state["phase"] == "failed" and state["in_flight"] == "update_registry", state
    assert bad_registry.read_bytes() == REGISTRY.read_bytes()      # nothing was replaced
    registry = tmp_path / "hip30.yaml"
    registry.write_bytes(REGISTRY.read_bytes())
    r = run_cli("playbook", "resume", "--sandbox", sb.name, "--registry", str(registry))
    assert r.code == 0, r.err
    assert "replication_factor: 3" in registry.read_text()
    state = journal(sb)
    assert [e["what"] for e in state["journal"]  # type: ignore[attr-defined]
            if e["step"] == "update_registry"] == ["started", "failed", "resumed", "finished"]
    assert state["phase"] == "done" and state["done"] == state["plan"]["steps"]  # type: ignore[index]

    # the secured end state: three brokers, RF 3, min ISR 2, the security settings
    st = sb.require()
    assert [(n.node_id, n.roles) for n in st.nodes] == [
        (0, "broker,controller"), (1, "broker"), (2, "broker")]
    def props(node: object) -> dict[str, str]:
        text = node.config_path.read_text()  # type: ignore[attr-defined]
        return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)

    first = props(st.nodes[0])
    secure = {k for k in first if k.startswith(("ssl.", "sasl.", "listener.name."))}
    assert secure and "SASL_SSL" in first["listener.security.protocol.map"]
    for node in st.nodes[1:]:
        got = props(node)
        for k in (*secure, "listener.security.protocol.map", "inter.broker.listener.name",
                  "authorizer.class.name", "super.users"):
            assert got.get(k) == first[k], (node.node_id, k)
        assert got["listeners"].split("://")[0] == first["listeners"].split("://")[0]
        assert oct(node.config_path.stat().st_mode & 0o777) == "0o600"
    with KafkaAdmin(sb.connection()) as admin:
        meta = admin.metadata()
        assert sorted(b.node_id for b in meta.brokers) == [0, 1, 2]
        for t, parts in meta.topics.items():
            for part in parts:
                assert len(part.replicas) == 3 and sorted(part.isr) == sorted(part.replicas), t
        assert admin.topic_configs(["llm_usage"])["llm_usage"]["min.insync.replicas"][0] == "2"
        for b, cfg in admin.broker_configs([0, 1, 2]).items():   # per-broker dynamic values
            assert cfg["min.insync.replicas"][0] == "2", b
    from opskit.sandbox.security import admin_context_name

    ctx = admin_context_name(sb.name, sb.security(st))
    r = run_cli("health", "--context", ctx)
    assert r.code == 0, r.out + r.err

    # a run killed after a node's JVM started but before its pid was saved: the rerun of
    # add_node adopts that JVM instead of starting a second one for the same node
    st = sb.require()
    pid = st.nodes[2].pid
    st.nodes[2].pid = None
    sb.save(st)
    r = run_cli("sandbox", "add-node", "--name", sb.name, "--node-id", "2")
    assert r.code == 0, r.err
    assert sb.require().nodes[2].pid == pid
    jvms = [d for d in Path("/proc").iterdir() if d.name.isdigit()
            and str(st.nodes[2].config_path) in _cmdline(d)]
    assert len(jvms) == 1, jvms


def _cmdline(proc_dir: Path) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
