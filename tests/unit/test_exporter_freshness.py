"""Per-family outcomes in the served state: up means "current", each failure counted once."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from opskit.exporter.freshness import FamilyRead, families_for
from opskit.exporter.options import ExporterOptions
from opskit.exporter.serving import Rendered, ServedState, StateReport

FAMS = families_for(ExporterOptions())


def values(state: ServedState) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(state.scrape().decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def ok(at: float, attempt: int = 1) -> FamilyRead:
    return FamilyRead(True, at, read_s=0.1, refresh_s=15.0, attempt=attempt)


def bad(at: float | None, kind: str, attempt: int) -> FamilyRead:
    return FamilyRead(False, at, kind, "closed", 0.1, 15.0, attempt)


def rendered(at_s: float, fams: dict[str, FamilyRead]) -> Rendered:
    return Rendered(int(at_s * 1000), b"", 0, fams)


def test_every_family_has_series_before_any_read() -> None:
    st = ServedState(60, lambda: 1000.0, FAMS)
    v = values(st)
    assert {dict(k)["family"] for k in v["opskit_exporter_family_up"]} == set(FAMS)
    assert set(v["opskit_exporter_family_up"].values()) == {0}
    assert "opskit_exporter_data_age_seconds" not in v


def test_a_failed_core_family_is_not_up_and_is_counted_once_per_read() -> None:
    now = [1000.0]
    st = ServedState(60, lambda: now[0], FAMS)
    good = {f: ok(990.0) for f in FAMS}
    st.publish_success(rendered(990.0, good), 1.0)
    v = values(st)
    assert v["opskit_kafka_up"][()] == 1
    assert v["opskit_exporter_data_age_seconds"][(("family", "groups"),)] == 10.0
    # groups fail; configs fail and keep their older data
    fams = {**good, "groups": bad(None, "unsupported", 2), "topic_configs": bad(900.0, "auth", 2)}
    st.publish_success(rendered(995.0, fams), 1.0)
    st.publish_success(rendered(996.0, fams), 1.0)  # same reads reported again: not recounted
    v = values(st)
    assert v["opskit_kafka_up"][()] == 0
    # each cycle without current groups data is a failed collection
    assert v["opskit_exporter_collection_errors_total"][(("kind", "unsupported"),)] == 2
    up = v["opskit_exporter_family_up"]
    assert up[(("family", "groups"),)] == 0 and up[(("family", "offsets"),)] == 1
    errs = v["opskit_exporter_family_errors_total"]
    assert errs[(("family", "groups"), ("kind", "unsupported"))] == 1
    assert errs[(("family", "topic_configs"), ("kind", "auth"))] == 1
    age = v["opskit_exporter_data_age_seconds"]
    assert (("family", "groups"),) not in age  # nothing served for it
    assert age[(("family", "topic_configs"),)] == 100.0  # served from its older read
    assert "groups could not be read" in st.ready()[1]
    # a new failed read counts again
    st.publish_success(rendered(997.0, {**fams, "groups": bad(None, "unsupported", 3)}), 1.0)
    assert values(st)["opskit_exporter_family_errors_total"][
        (("family", "groups"), ("kind", "unsupported"))] == 2


def test_a_failed_cycle_makes_every_family_not_current() -> None:
    st = ServedState(60, lambda: 1000.0, FAMS)
    st.publish_success(rendered(990.0, {f: ok(990.0) for f in FAMS}), 1.0)
    st.publish_failure("unreachable", "cannot reach Kafka", 2.0)
    v = values(st)
    assert v["opskit_kafka_up"][()] == 0
    assert set(v["opskit_exporter_family_up"].values()) == {0}
    # the last good snapshot is still served, with its true age
    assert v["opskit_exporter_data_age_seconds"][(("family", "groups"),)] == 10.0


def test_family_counters_survive_a_collector_restart() -> None:
    st = ServedState(60, lambda: 1000.0, FAMS)
    fams = {f: ok(990.0) for f in FAMS} | {"groups": bad(None, "timeout", 1)}
    rep = StateReport(rendered(990.0, fams), False, 1, {"timeout": 1}, 1.0, 990.0, "x", True,
                      {("groups", "timeout"): 1}, fams)
    # the parent folds a dead child's counts into its base and adds them to the new child's
    st.apply(rep, {}, 0, {("groups", "timeout"): 3})
    assert values(st)["opskit_exporter_family_errors_total"][
        (("family", "groups"), ("kind", "timeout"))] == 4
