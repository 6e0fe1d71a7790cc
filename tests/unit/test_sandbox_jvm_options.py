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
