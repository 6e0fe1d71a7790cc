"""``playbook status`` on Kubernetes: a run whose process is gone (kill -9, a lost node)
is "interrupted", told by its Lease, which a live run renews every ``duration / 3``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from opskit.adapters.scaleout.k8s import lease_state
from opskit.cli.playbook.run import headline

NOW = datetime(2026, 11, 28, 4, 30, 0, tzinfo=UTC)


class FakeLeases:
    def __init__(self, spec: dict[str, Any] | None) -> None:
        self.spec = spec
        self.read: list[tuple[str, str]] = []

    def read_lease(self, namespace: str, name: str) -> tuple[dict[str, Any], str] | None:
        self.read.append((namespace, name))
        return None if self.spec is None else (self.spec, "7")


def _spec(holder: str, renewed: datetime, duration: int = 30) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


def test_a_renewed_lease_is_a_running_run() -> None:
    api = FakeLeases(_spec("pod-a-41", NOW - timedelta(seconds=5)))
    got = lease_state(api, "hanzo", "insights-kafka", NOW)  # type: ignore[arg-type]
    assert got == {"state": "running", "holder": "pod-a-41", "until": "04:30:25Z"}
    assert api.read == [("hanzo", "opskit-scaleout-insights-kafka")]


def test_a_lease_not_renewed_in_time_is_an_interrupted_run() -> None:
    api = FakeLeases(_spec("pod-a-41", NOW - timedelta(seconds=31)))
    got = lease_state(api, "hanzo", "insights-kafka", NOW)  # type: ignore[arg-type]
    assert got == {"state": "interrupted",
                   "lease": "its Lease, held by pod-a-41, was not renewed after 04:29:59Z"}


def test_a_released_or_missing_lease_is_an_interrupted_run() -> None:
    for spec in (None, _spec("", NOW), {"holderIdentity": "x"}):
        got = lease_state(FakeLeases(spec), "ns", "sts", NOW)  # type: ignore[arg-type]
        assert got == {"state": "interrupted", "lease": "no run holds its Lease"}, spec


def test_the_headline_names_the_lease_and_the_resume() -> None:
    data = {"phase": "running", "in_flight": "spread",
            "process": {"state": "interrupted", "lease": "its Lease, held by p, was not "
                        "renewed after 04:29:59Z", "resume_command": "opskit playbook resume "
                        "--platform kubernetes --namespace ns --statefulset sts"}}
    assert headline(data) == ("interrupted (its Lease, held by p, was not renewed after "
                              "04:29:59Z): resume with opskit playbook resume --platform "
                              "kubernetes --namespace ns --statefulset sts")
    running = {"phase": "running", "in_flight": "spread",
               "process": {"state": "running", "holder": "p", "until": "04:30:25Z"}}
    assert headline(running) == "running"


class _Args:
    def require(self, kafka: bool = True) -> tuple[str, str]:
        return "hanzo", "insights-kafka"


class _Phase:
    def __init__(self, value: str) -> None:
        self.value = value


class _State:
    def __init__(self, phase: str, in_flight: str | None) -> None:
        self.phase, self.in_flight = _Phase(phase), in_flight


def test_a_halted_run_is_told_how_to_resume_on_kubernetes() -> None:
    from opskit.cli.playbook.k8s import stopped_inside

    for phase in ("halted", "failed"):
        data: dict[str, Any] = {"phase": phase, "in_flight": "spread"}
        data.update(stopped_inside(_Args(), _State(phase, "spread")) or {})  # type: ignore[arg-type]
        assert data["in_flight_state"] == phase
        assert headline(data).endswith(
            "with opskit playbook resume --platform kubernetes --namespace hanzo "
            "--statefulset insights-kafka (and the run's other options)"), headline(data)
    for phase, in_flight in (("running", "spread"), ("halted", None), ("done", None)):
        assert stopped_inside(_Args(), _State(phase, in_flight)) is None  # type: ignore[arg-type]
