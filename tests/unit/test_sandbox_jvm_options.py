"""OPSKIT_SANDBOX_JVM_OPTS: split like a shell, only options, on every Kafka JVM opskit starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from opskit.errors import UsageError
from opskit.sandbox.dist import KafkaDist, jvm_options


def test_options_are_split_like_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_SANDBOX_JVM_OPTS", "-XX:+UseSerialGC  '-Dx=a b'")
    assert jvm_options() == ["-XX:+UseSerialGC", "-Dx=a b"]
    monkeypatch.setenv("OPSKIT_SANDBOX_JVM_OPTS", "")
    assert jvm_options() == []
    monkeypatch.delenv("OPSKIT_SANDBOX_JVM_OPTS")
    assert jvm_options() == []


@pytest.mark.parametrize("raw", ["-Xss1m kafka.Kafka", "'-Xss1m", "rm"])
def test_a_value_that_is_not_options_is_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("OPSKIT_SANDBOX_JVM_OPTS", raw)
    with pytest.raises(UsageError, match="OPSKIT_SANDBOX_JVM_OPTS"):
        jvm_options()


def test_tools_get_the_options_before_the_class_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_SANDBOX_JVM_OPTS", "-XX:TieredStopAtLevel=1")
    monkeypatch.setattr("opskit.sandbox.dist.java_binary", lambda: "java")
    cmd = KafkaDist("3.7.2", Path("/nowhere")).java_cmd("kafka.tools.StorageTool", "random-uuid")
    assert cmd.index("-XX:TieredStopAtLevel=1") < cmd.index("-cp") < cmd.index("kafka.tools.StorageTool")


@pytest.mark.parametrize(("raw", "g1"), [("-XX:+UseSerialGC -XX:TieredStopAtLevel=1", False),
                                         ("-XX:TieredStopAtLevel=1", True), ("", True)])
def test_a_node_start_reads_the_options_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             raw: str, g1: bool) -> None:
    """One node start splits OPSKIT_SANDBOX_JVM_OPTS once, for the command line and for the
    choice of G1 (only when the options pick no collector)."""
    import shlex

    from opskit.sandbox import cluster
    from opskit.sandbox.state import Node

    monkeypatch.setenv("OPSKIT_SANDBOX_JVM_OPTS", raw)
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path / "state"))
    monkeypatch.setattr("opskit.sandbox.dist.java_binary", lambda: "java")
    splits: list[str] = []
    real_split = shlex.split

    def counting_split(s: str, *a: object, **kw: object) -> list[str]:
        splits.append(s)
        return real_split(s)

    monkeypatch.setattr("opskit.sandbox.dist.shlex.split", counting_split)
    started: list[list[str]] = []

    class FakePopen:
        pid = 4242

        def __init__(self, cmd: list[str], **_kw: object) -> None:
            started.append(cmd)

    monkeypatch.setattr(cluster.subprocess, "Popen", FakePopen)
    node = Node(0, "broker,controller", 9092, str(tmp_path / "n0"))
    node.dir.mkdir()
    cluster.Sandbox("t")._start_node(KafkaDist("3.7.2", tmp_path), node)
    assert splits == [raw]
    (cmd,) = started
    assert ("-XX:+UseG1GC" in cmd) is g1
    assert all(o in cmd for o in real_split(raw))
    assert node.pid == 4242
