"""When an advertised API is remembered as not served (the rules of
KafkaAdmin.observe_not_served / note_silent; the exporter on a broker:
tests/integration/test_exporter_not_served.py)."""

from __future__ import annotations

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.core.connection import ConnectionConfig


def _admin(confirmations: int) -> KafkaAdmin:
    a = KafkaAdmin(ConnectionConfig("127.0.0.1:1"), timeout=1)  # never connects here
    a.confirmations = confirmations
    return a


def test_a_command_remembers_a_closed_connection_at_once() -> None:
    a = _admin(1)
    a.new_round()
    assert a.observe_not_served("list_groups", "closed") is True
    assert a.not_served("list_groups")


def test_the_served_exporter_needs_two_cycles_without_a_success() -> None:
    a = _admin(2)
    a.new_round()
    assert not a.observe_not_served("list_groups", "closed")
    assert not a.observe_not_served("list_groups", "closed again, same cycle")  # one round
    assert not a.not_served("list_groups")
    a.new_round()
    a.served("list_groups")  # answered: what was seen is forgotten
    assert not a.observe_not_served("list_groups", "closed")
    a.new_round()
    assert a.observe_not_served("list_groups", "closed")
    assert a.not_served("list_groups") and not a.not_served("describe_groups")


def test_a_timeout_is_remembered_only_for_describe_configs_in_a_command() -> None:
    assert not _admin(1).note_silent("ListGroups", "h:1", "no answer")
    assert not _admin(1).note_silent("DescribeGroups", "h:1", "no answer")
    assert not _admin(2).note_silent("DescribeConfigs", "h:1", "no answer")
    a = _admin(1)
    assert a.note_silent("DescribeConfigs", "h:1", "no answer")
    assert a.quirks.dead_api("DescribeConfigs") is not None


def test_apis_without_another_path_are_never_written_off() -> None:
    a = _admin(1)
    assert not a.observe_not_served("committed_offsets", "closed")
    assert not a.not_served("committed_offsets")
