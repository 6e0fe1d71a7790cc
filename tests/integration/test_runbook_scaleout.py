"""Every ``opskit ...`` command of runbooks/scale-out-1-to-3.md, run on a sandbox of its own.

The shared runbook test (test_runbook_commands.py) runs each runbook line on one shared
1-broker cluster; a scale-out would change that cluster for every later test, so this
runbook is routed here (that test asserts each runbook command is run by exactly one of
the two). The commands run as an on-call SRE would meet them, not in page order: the
preflight and the dry run; the scheduled command outside its window (halts before any
change, exit 5); status; abort, applied by the next resume (exit 5); the execute step,
SIGKILLed while the RF raise is in flight, as a crash would; resume to the end; the checks
afterwards (a topic created without an RF gets RF 3: the playbook's rolling restart
applied the new defaults) and a node's restart by hand. Each command's exit status must be the one the
runbook's comment documents, and the one this story expects.

The whole story runs on Kafka 3.7 (static quorum). The static -> dynamic upgrade runs on
a 4.3.1 sandbox formatted static, and the scale-out's plan after it (add_node then
promote_voter per node) is checked as a dry run only: a dynamic-quorum execution end to end
is test_playbook_local.py's 4.x scenario, and a second full run here would double this
test's minutes. The Kubernetes lines run against the real API server (dry run, status,
abort, the CronJob manifest); the execute step there runs inside the CronJob's pod, tested
end to end by test_playbook_k8s.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from helpers import cli_sandbox, commit, run_cli
from hip30_k8s import hip30_statefulset
from k8s_apiserver import ApiServer

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.sandbox.cluster import Sandbox

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "runbooks" / "scale-out-1-to-3.md"
REGISTRY = ROOT / "opskit" / "registry" / "hip30.yaml"
PLACEHOLDER = re.compile(r"<([a-z-]+)>")

# the story, in order: (the runbook's command, the exit status expected at that point)
PREFLIGHT = ("opskit health --context <context>",
             "opskit reassign status --context <context>",
             "opskit topics diff <registry> --context <context>")
DRY_RUN = "opskit playbook scale-out --brokers 3 --sandbox <sandbox> --throttle 20MiB"
SCHEDULED = ("opskit playbook scale-out --brokers 3 --sandbox <sandbox> --throttle 20MiB "
             "--registry <registry> --window <window> --execute")
STATUS = "opskit playbook status --sandbox <sandbox>"
ABORT_DRY = "opskit playbook abort --sandbox <sandbox>"
ABORT = "opskit playbook abort --sandbox <sandbox> --execute"
RESUME = "opskit playbook resume --sandbox <sandbox> --throttle 20MiB --registry <registry>"
EXECUTE = ("opskit playbook scale-out --brokers 3 --sandbox <sandbox> --throttle 20MiB "
           "--registry <registry> --execute")
AFTER = ("opskit health --context <context> --expected-brokers 3",
         "opskit topics diff <registry> --context <context>")
RESTART = ("opskit sandbox stop-node 1 --name <sandbox>",
           "opskit sandbox start-node 1 --name <sandbox>")

CONTROLLERS = ("opskit playbook scale-out --brokers 3 --controllers 3 --sandbox <sandbox> "
               "--throttle 20MiB")
UPGRADE_DRY = "opskit playbook upgrade-quorum --sandbox <sandbox>"
UPGRADE = "opskit playbook upgrade-quorum --sandbox <sandbox> --execute"
K8S = ("--platform kubernetes --namespace <namespace> --statefulset <statefulset> "
       "--kubeconfig <kubeconfig>")
K8S_DRY_RUN = ("opskit playbook scale-out --brokers 3 --platform kubernetes --namespace "
               "<namespace> --statefulset <statefulset> --context <context> --kubeconfig "
               "<kubeconfig> --throttle 20MiB")
K8S_CRONJOB = ("opskit playbook cronjob --namespace <namespace> --statefulset <statefulset> "
               '--image <image> --schedule "0 2 * * *" --window 02:00-05:00Z --context '
               "<context> --page --write <manifest>")
K8S_STATUS = f"opskit playbook status {K8S}"
K8S_ABORT_DRY = f"opskit playbook abort {K8S}"
K8S_ABORT = f"opskit playbook abort {K8S} --execute"

#: every command this test runs; the shared runbook test reads it (exactly-one coverage)
SCENARIO_COMMANDS = frozenset({*PREFLIGHT, DRY_RUN, CONTROLLERS, UPGRADE_DRY, UPGRADE,
                               SCHEDULED, STATUS, ABORT_DRY, ABORT, RESUME, EXECUTE, *AFTER,
                               *RESTART, K8S_DRY_RUN, K8S_CRONJOB, K8S_STATUS, K8S_ABORT_DRY,
                               K8S_ABORT})


def runbook_commands() -> dict[str, set[int]]:
    """Each fenced ``opskit`` command of the runbook -> the exit statuses its comment names."""
    found: dict[str, set[int]] = {}
    in_fence = False
    for raw in RUNBOOK.read_text().splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_fence = not in_fence
        elif in_fence and line.startswith("opskit "):
            command, _, comment = line.partition("#")
            found[command.strip()] = {int(d) for d in re.findall(r"\b(\d)\b", comment)}
    return found


def test_the_stories_run_every_command_of_the_runbook_and_each_says_its_exit() -> None:
    documented = runbook_commands()
    assert set(documented) == SCENARIO_COMMANDS
    for command, exits in documented.items():
        assert exits, f"{command}: the runbook does not say which exit to expect"


@contextmanager
def one_node_sandbox(name: str, version: str, quorum: str,
                     tmp_path: Path) -> Iterator[dict[str, str]]:
    """A one-node sandbox holding the HIP-30 topics, some data and a group."""
    with cli_sandbox(name, "--kafka-version", version, "--quorum", quorum) as sb:
        context = f"sandbox-{name}"
        assert run_cli("topics", "apply", "--context", context, "--execute").code == 0
        bootstrap = sb.require().bootstrap
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(400):
            p.produce("llm_usage", key=f"team-{i % 8}".encode(), value=os.urandom(2000))
        assert p.flush(60) == 0
        commit(bootstrap, "billing-agg", {("llm_usage", 0): 1})   # __consumer_offsets too
        registry = tmp_path / "hip30.yaml"
        shutil.copy(REGISTRY, registry)
        hour = (time.gmtime().tm_hour + 2) % 24         # a window that is closed now
        yield {"sandbox": name, "context": context, "registry": str(registry),
               "window": f"{hour:02d}:00-{(hour + 1) % 24:02d}:00Z"}


@pytest.fixture
def cluster(uniq: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    with one_node_sandbox(f"rb{uniq}", "3.7", "static", tmp_path) as values:
        yield values


@pytest.fixture
def cluster4_static(uniq: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    with one_node_sandbox(f"rd{uniq}", "4.x", "static", tmp_path) as values:
        yield values


class Runbook:
    """Runs the runbook's commands with the placeholders filled in."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.documented = runbook_commands()
        self.ran: set[str] = set()

    def argv(self, command: str) -> list[str]:
        assert command in self.documented, f"not in the runbook: {command}"
        self.ran.add(command)
        return shlex.split(PLACEHOLDER.sub(lambda m: self.values[m.group(1)], command))[1:]

    def run(self, command: str, expect: int) -> str:
        assert expect in self.documented[command], (command, expect)
        r = run_cli(*self.argv(command))
        assert r.code == expect, f"{command}: exit {r.code}, expected {expect}: {r.err}"
        return r.out + r.err

    def journal(self) -> dict[str, object]:
        path = Sandbox(self.values["sandbox"]).playbook_dir / "journal.json"
        try:
            return json.loads(path.read_text())["state"]  # type: ignore[no-any-return]
        except (OSError, ValueError, KeyError):
            return {}

    def kill_during(self, command: str, step: str, timeout: float = 600) -> None:
        """Start ``command`` in a child process; SIGKILL it once ``step`` is in flight,
        after running ``playbook status`` while it is."""
        proc = subprocess.Popen([sys.executable, "-m", "opskit.cli.main", *self.argv(command)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while self.journal().get("in_flight") != step:
                assert proc.poll() is None, (f"{command} ended before {step}: "
                                             f"{proc.stderr.read().decode()[-500:] if proc.stderr else ''}")
                assert time.monotonic() < deadline, f"{step} never started"
                time.sleep(0.1)
            assert "RUNNING  raise_rf" in self.run(STATUS, 0)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@pytest.mark.timeout(1800)   # the playbook's own rolling restart adds 3 node restarts
def test_scale_out_runbook_from_preflight_to_rolling_restart(cluster: dict[str, str]) -> None:
    rb = Runbook(cluster)
    sb = Sandbox(cluster["sandbox"])
    for command in PREFLIGHT:
        rb.run(command, 0)
    assert "(broker)" in rb.run(DRY_RUN, 0)                 # broker-only nodes: static quorum
    assert "static" in rb.run(CONTROLLERS, 5)               # more voters: refused
    assert "4.1" in rb.run(UPGRADE_DRY, 5)                  # 3.7 cannot become dynamic
    assert rb.journal() == {}                                # nothing changed so far

    out = rb.run(SCHEDULED, 5)                               # outside the window
    assert "maintenance window" in out
    assert rb.journal()["phase"] == "halted" and len(sb.require().nodes) == 1
    assert "halted" in rb.run(STATUS, 0)
    assert "would ask run" in rb.run(ABORT_DRY, 0)
    assert not (sb.playbook_dir / "abort").exists()
    rb.run(ABORT, 0)
    assert "aborted" in rb.run(RESUME, 5)                    # the next run applies the abort
    assert rb.journal()["phase"] == "aborted" and len(sb.require().nodes) == 1

    rb.kill_during(EXECUTE, "raise_rf")                      # a crash inside the copy
    out = rb.run(RESUME, 0)
    state = rb.journal()
    assert state["phase"] == "done" and state["done"] == state["plan"]["steps"]  # type: ignore[index]

    for command in AFTER:
        rb.run(command, 0)
    with KafkaAdmin(sb.connection()) as admin:
        meta = admin.metadata()
        assert sorted(b.node_id for b in meta.brokers) == [0, 1, 2]
        assert {len(p.isr) for parts in meta.topics.values() for p in parts} == {3}
        # finished: the rolling restart applied default.replication.factor=3
        admin.create_topics([("made_after_the_run", 2, -1, {})])
        deadline = time.monotonic() + 60
        while not admin.metadata().topics.get("made_after_the_run"):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert {len(p.replicas) for p in admin.metadata().topics["made_after_the_run"]} == {3}
        admin.delete_topics(["made_after_the_run"])
    assert "restart_node:0" in state["done"]  # type: ignore[operator]
    for command in RESTART:
        rb.run(command, 0)
    # the restarted node runs with the read-only defaults the playbook wrote for it
    assert "default.replication.factor=3" in sb.require().nodes[1].config_path.read_text()
    assert rb.ran == SCENARIO_COMMANDS - KUBERNETES_STORY - {UPGRADE}


@pytest.mark.kafka4
def test_static_to_dynamic_upgrade_then_the_add_controller_plan(
        cluster4_static: dict[str, str]) -> None:
    """Kafka 4.3.1 formatted with a static voter set: the upgrade's dry run, its execute
    step, then the scale-out plans the dynamic path (observers promoted to voters one at
    a time). The scale-out itself on a dynamic quorum runs end to end in
    test_playbook_local.py; here only its plan."""
    rb = Runbook(cluster4_static)
    sb = Sandbox(cluster4_static["sandbox"])
    assert "kraft.version" in rb.run(UPGRADE_DRY, 0)
    assert sb.require().quorum == "static"                    # the dry run changed nothing
    rb.run(UPGRADE, 0)
    assert sb.require().quorum == "dynamic"
    for command in (DRY_RUN, CONTROLLERS):
        out = rb.run(command, 0)
        assert "dynamic quorum" in out and "(broker,controller)" in out
        steps = [ln.split()[-1] for ln in out.splitlines() if ln.strip().startswith("-  ")]
        assert steps[1:5] == ["add_node:1", "add_node:2", "promote_voter:1", "promote_voter:2"]
    assert rb.journal() == {} and len(sb.require().nodes) == 1
    assert rb.ran == {UPGRADE_DRY, UPGRADE, DRY_RUN, CONTROLLERS}


KUBERNETES_STORY = frozenset({K8S_DRY_RUN, K8S_CRONJOB, K8S_STATUS, K8S_ABORT_DRY, K8S_ABORT})


def test_kubernetes_commands_of_the_runbook(apiserver: ApiServer, uniq: str,
                                            tmp_path: Path) -> None:
    """Against the real API server and a one-node 3.7 sandbox standing in for HIP-30's
    combined pod: the dry run plans broker-only nodes and creates nothing; before any run,
    status and abort find nothing (exit 4); the CronJob manifest is written. The execute
    step itself runs inside the CronJob's pod; it is tested end to end, with a
    test-played kubelet, by test_playbook_k8s.py."""
    from kubernetes import client

    from opskit.adapters.k8s.api import KubeApi, KubeTarget

    namespace = f"rb-{uniq}"
    token = tmp_path / "token"
    token.write_text(apiserver.token)
    api = KubeApi(KubeTarget(host=apiserver.host, token_file=str(token),
                             ca_file=str(apiserver.ca_file)))
    api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    combined = hip30_statefulset()
    combined["metadata"]["namespace"] = namespace  # type: ignore[index]
    assert api.apply_statefulset(combined) == "created"
    statefulset = str(combined["metadata"]["name"])  # type: ignore[index]
    with one_node_sandbox(f"rk{uniq}", "3.7", "static", tmp_path) as values:
        rb = Runbook({**values, "namespace": namespace, "statefulset": statefulset,
                      "kubeconfig": str(apiserver.kubeconfig()),
                      "image": "registry.example/opskit:1",
                      "manifest": str(tmp_path / "cronjob.yaml")})
        out = rb.run(K8S_DRY_RUN, 0)
        assert "(broker)" in out and "static quorum" in out
        assert api.get_statefulset(namespace, f"{statefulset}-broker") is None
        assert api.read_configmap(namespace, f"opskit-scaleout-{statefulset}") is None
        rb.run(K8S_STATUS, 4)
        rb.run(K8S_ABORT_DRY, 4)
        rb.run(K8S_ABORT, 4)
        rb.run(K8S_CRONJOB, 0)
        docs = [d for d in yaml.safe_load_all((tmp_path / "cronjob.yaml").read_text()) if d]
        assert [d["kind"] for d in docs] == ["ServiceAccount", "Role", "RoleBinding", "CronJob"]
        assert rb.ran == KUBERNETES_STORY
