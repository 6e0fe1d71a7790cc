"""Grafana dashboards: fresh JSON, explicit schema, runbook links, only known metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from opskit.core.alert_rules import RECORDED_NAMES
from opskit.core.promql import promql_metric_names
from opskit.dashboards.common import SCHEMA_VERSION
from opskit.dashboards.generate import build, generate, output_path, panels, sources
from opskit.errors import InvalidInputError, NotFoundError
from opskit.exporter.names import exported_names

ROOT = Path(__file__).resolve().parents[2]
DASH = ROOT / "dashboards"
BASE = "https://github.com/hanzoai/opskit/blob/main/runbooks"


def _models(base: str = BASE) -> dict[str, dict[str, Any]]:
    return {src.name: build(src, base) for src in sources(DASH)}


def test_checked_in_json_is_not_stale() -> None:
    stale = generate(DASH, BASE, check=True)
    assert stale == [], f"stale: {stale}; run `opskit dashboards generate`"


def test_a_changed_source_is_detected_as_stale(tmp_path: Path) -> None:
    src = tmp_path / "x.dashboard.py"
    src.write_text((DASH / "kafka-operations.dashboard.py").read_text())
    assert generate(tmp_path, BASE) == [output_path(src)]
    assert generate(tmp_path, BASE, check=True) == []
    src.write_text(src.read_text().replace('"Kafka / Operations"', '"Kafka / Ops"'))
    assert generate(tmp_path, BASE, check=True) == [output_path(src)]


def test_the_four_dashboards_exist_with_explicit_schema() -> None:
    models = _models()
    assert set(models) == {"kafka-cluster-overview.dashboard.py", "kafka-consumer-lag.dashboard.py",
                           "kafka-topic-throughput.dashboard.py", "kafka-operations.dashboard.py"}
    assert len({m["uid"] for m in models.values()}) == 4
    for m in models.values():
        assert m["schemaVersion"] == SCHEMA_VERSION != 12


def test_every_panel_links_an_existing_runbook() -> None:
    for name, m in _models().items():
        for p in panels(m):
            urls = [link["url"] for link in p["links"]]
            assert urls and all(u.startswith(BASE + "/") for u in urls), (name, p["title"])
            for u in urls:
                page = ROOT / "runbooks" / u[len(BASE) + 1:]
                assert page.is_file(), f"{name} / {p['title']}: no runbook {page.name}"


def test_runbook_base_url_is_configurable() -> None:
    for m in _models("https://wiki.example/kafka").values():
        assert all(link["url"].startswith("https://wiki.example/kafka/")
                   for p in panels(m) for link in p["links"])


def test_every_query_uses_known_metrics_and_a_datasource_object() -> None:
    known = exported_names() | set(RECORDED_NAMES) | {"up"}
    used: set[str] = set()
    for name, m in _models().items():
        for p in panels(m):
            if p["type"] in ("row", "text"):
                continue
            assert p["targets"], (name, p["title"])
            for t in p["targets"]:
                assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                used |= promql_metric_names(t["expr"])
        for v in m["templating"]["list"]:
            if v["type"] == "query":
                m_ = re.fullmatch(r"label_values\((.*),\s*\w+\)", v["query"])
                assert m_, v["query"]
                used |= promql_metric_names(m_.group(1))
    assert len(used) > 20
    assert used - known == set()


@pytest.mark.parametrize("source, titles", [
    ("kafka-cluster-overview.dashboard.py",
     {"Brokers online", "Active controller", "KRaft voters", "Under-replicated", "Under min ISR",
      "Offline", "Messages in / consumed per second", "Bytes in per second"}),
    ("kafka-consumer-lag.dashboard.py",
     {"Lag (messages)", "Lag (time)", "Status", "Catch-up ETA", "Retention headroom",
      "Produce vs consume rate", "Per partition"}),
    ("kafka-topic-throughput.dashboard.py",
     {"Messages in per second", "Bytes in per second", "Dead letters per 5 minutes"}),
    ("kafka-operations.dashboard.py",
     {"Reassignments in progress", "Replication throttles", "Topics with throttled replicas",
      "KRaft follower lag"}),
])
def test_required_panels(source: str, titles: set[str]) -> None:
    m = build(DASH / source, BASE)
    assert titles <= {p["title"] for p in panels(m)}


def test_consumer_lag_dashboard_has_group_and_topic_variables() -> None:
    m = build(DASH / "kafka-consumer-lag.dashboard.py", BASE)
    names = [v["name"] for v in m["templating"]["list"]]
    assert names == ["datasource", "cluster", "consumergroup", "topic"]


def test_bad_sources_are_clean_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        sources(tmp_path / "missing")
    with pytest.raises(NotFoundError):
        sources(tmp_path)
    bad = tmp_path / "bad.dashboard.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(InvalidInputError, match="boom"):
        build(bad, BASE)
    bad.write_text("x = 1\n")
    with pytest.raises(InvalidInputError, match="build"):
        build(bad, BASE)


def test_dashboards_generate_cli(tmp_path: Path) -> None:
    import shutil
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import run_cli

    r = run_cli("dashboards", "generate", "--dir", str(DASH), "--check")
    assert r.code == 0 and "up to date: 4 dashboards" in r.out
    shutil.copy(DASH / "kafka-operations.dashboard.py", tmp_path)
    r = run_cli("dashboards", "generate", "--dir", str(tmp_path), "--check")
    assert r.code == 1 and "stale:" in r.out and not (tmp_path / "kafka-operations.json").exists()
    r = run_cli("dashboards", "generate", "--dir", str(tmp_path),
                "--runbook-base-url", "https://wiki.example/rb")
    assert r.code == 0 and "https://wiki.example/rb/scaling.md" in (
        tmp_path / "kafka-operations.json").read_text()
    r = run_cli("dashboards", "generate", "--dir", str(tmp_path / "nope"))
    assert r.code == 4 and r.err.startswith("opskit: error:")
