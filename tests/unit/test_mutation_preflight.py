"""Inputs of the Kubernetes playbook and its kubeconfig, checked before any request.

The API server here is a TCP listener that counts connections (and closes each): a
case that opens one has reached the point of acting. Every bad input must end in one
``opskit: error:`` line, exit 2 (bad value) or 4 (missing file), with no connection:
nothing read, no Lease taken, no journal written. The kubeconfig cases are the ones
of issue #28 (a file that is not a kubeconfig, 50 MB, empty, ``null``, an API server
that refuses connections).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli

KEY = "0123456789abcdef0123456789abcdef"


class CountingServer:
    """Accepts and closes connections on a loopback port, counting them."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)    # wakes the accept()
        self.sock.close()
        self._thread.join(5)


def _kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: not-a-secret}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\ncurrent-context: a\n")
    return path


@pytest.fixture
def apiserver_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingServer]:
    cfg = tmp_path / "opskit.yaml"       # the opskit (Kafka) context the runs name
    cfg.write_text("contexts:\n  kafka: {bootstrap: '127.0.0.1:1'}\n")
    monkeypatch.setenv("OPSKIT_CONFIG", str(cfg))
    srv = CountingServer()
    try:
        yield srv
    finally:
        srv.close()


def _one_line(r: object, code: int) -> str:
    err = r.err  # type: ignore[attr-defined]
    assert r.code == code, (r.code, err)  # type: ignore[attr-defined]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opskit: error: "), err
    return str(lines[0])


def test_k8s_playbook_inputs_fail_before_any_request(apiserver_double: CountingServer,
                                                     tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kubeconfig", apiserver_double.port)
    key = tmp_path / "key"
    key.write_text(KEY)
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    registry = tmp_path / "hip30.yaml"
    registry.write_text("topics: 5\n")
    def on(context: str) -> list[str]:
        return ["--platform", "kubernetes", "--namespace", "kafka", "--statefulset", "kafka",
                "--context", context, "--kubeconfig", str(kc)]

    k8s = on("kafka")
    cases: list[tuple[list[str], int, str]] = [
        (["--registry", str(tmp_path / "hip30.yml")], 4, "does not exist"),   # the typo
        (["--registry", str(registry)], 2, "topics"),
        (["--registry", "/dev/zero"], 2, "a device, not a file"),
        (["--routing-key-file", str(key), "--pagerduty-ca-file", str(not_pem)], 2, "PEM"),
        (["--routing-key-file", str(key), "--pagerduty-ca-file", str(tmp_path / "no.pem")],
         4, "does not exist"),
        (["--routing-key-file", str(key), "--pagerduty-url", "https://[::1"], 2, "https://"),
        (["--routing-key-file", str(tmp_path / "no-key")], 4, "does not exist"),
        (["--pagerduty-url", "https://127.0.0.1:9"], 2, "--routing-key-file"),
        (["--throttle", "0"], 2, "--throttle"),
        (["--window", ""], 2, "--window"),
    ]
    for extra, code, words in cases:
        for command in (["scale-out", "--execute"], ["resume"]):
            r = run_cli("playbook", *command, *k8s, *extra)
            assert words in _one_line(r, code), (command, extra, r.err)
    for bad_name in (["--namespace", "Kafka_NS"], ["--statefulset", "k" * 64]):
        r = run_cli("playbook", "scale-out", "--execute", *k8s, *bad_name)
        assert "not a Kubernetes name" in _one_line(r, 2)
    # an unknown opskit context: before the API server is asked anything (resume took
    # the run's Lease first)
    r = run_cli("playbook", "resume", *on("nope"))
    _one_line(r, 4)
    assert apiserver_double.connections == 0
    # the control: valid inputs do reach the API server (which fails them: exit 3)
    r = run_cli("playbook", "resume", *k8s)
    _one_line(r, 3)
    assert apiserver_double.connections > 0


def test_kubeconfig_files_that_are_not_kubeconfigs(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as f:          # 50 MB (sparse): refused at the bound, not parsed
        f.truncate(50 * 1024 * 1024)
    files = {"not-yaml-mapping": ("kafka-0\n", 2), "empty": ("", 2), "null": ("null\n", 2),
             "contexts-int": ("contexts: 5\n", 2),
             "clusters-int": (("contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                              "current-context: a\nclusters: 3\nusers: []\n"), 2),
             "binary": ("\x00\x01\x02", 2)}
    cases: list[tuple[Path, int]] = [(big, 2), (tmp_path / "missing", 4), (tmp_path, 2)]
    for name, (text, code) in files.items():
        (tmp_path / name).write_text(text)
        cases.append((tmp_path / name, code))
    for path, code in cases:
        r = run_cli("playbook", "status", "--platform", "kubernetes", "--namespace", "kafka",
                    "--statefulset", "kafka", "--kubeconfig", str(path))
        _one_line(r, code)
    kc = _kubeconfig(tmp_path / "kc", 1)
    r = run_cli("playbook", "status", "--platform", "kubernetes", "--namespace", "kafka",
                "--statefulset", "kafka", "--kubeconfig", str(kc), "--kube-context", "nope")
    assert "'nope'" in _one_line(r, 4)


def test_unreachable_api_server_is_one_line(tmp_path: Path) -> None:
    """Connection refused: opskit's line only (urllib3's own retry warnings are --debug's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]       # closed again: nothing listens there
    kc = _kubeconfig(tmp_path / "kc", port)
    r = run_cli("playbook", "status", "--platform", "kubernetes", "--namespace", "kafka",
                "--statefulset", "kafka", "--kubeconfig", str(kc))
    line = _one_line(r, 3)
    assert f"cannot reach the Kubernetes API server at https://127.0.0.1:{port}" in line
    assert "connection refused" in line
    assert "Retrying" not in r.err


def test_missing_acls_of_groups_and_of_the_changes_at_hand() -> None:
    from opskit.core.acl_needs import missing_acls

    describe = frozenset({"DESCRIBE"})
    assert missing_acls("offsets reset --execute", describe, {"t": describe},
                        {"g": describe, "h": None}) == ["Read on group g", "Read on topic t"]
    assert missing_acls("offsets reset --execute", None, {"t": frozenset({"READ"})},
                        {"g": frozenset({"READ", "DESCRIBE"})}) == []
    # a group the principal may not even describe lacks everything
    assert missing_acls("offsets reset (dry run)", None, {}, {"g": frozenset()}) == [
        "Describe on group g"]
    # topics apply: only the needs of the change at hand
    alter = frozenset({("topic", "ALTER")})
    assert missing_acls("topics apply --execute", frozenset(), {"t": describe},
                        only=alter) == ["Alter on topic t"]
    assert missing_acls("acls apply --execute", describe, {}) == ["Alter on the cluster"]
