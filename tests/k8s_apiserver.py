"""A real Kubernetes API server (etcd + kube-apiserver) on loopback for the tests.

Built by ``scripts/install-k8s.sh`` from the Go module proxy (cached). There is no
kubelet, scheduler or controller manager: objects are stored and validated by the real
API server, but pods never run. A test that needs a pod "running" plays the kubelet
itself (it patches the pod's status through the API) and says so.

Authentication: a static bearer token of a ``system:masters`` user; authorization RBAC
(so a ServiceAccount's permissions can be checked with SubjectAccessReview).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from opskit.sandbox.ports import free_port_block  # below the ephemeral range

ROOT = Path(__file__).resolve().parent.parent


def k8s_bin_dir() -> Path:
    """The cached binaries' directory (builds them on first use)."""
    out = subprocess.run([str(ROOT / "scripts" / "install-k8s.sh")], capture_output=True,
                         text=True, check=False, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/install-k8s.sh failed: {out.stderr.strip()[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass
class ApiServer:
    """etcd + kube-apiserver processes; ``host`` is ``https://127.0.0.1:PORT``."""

    workdir: Path
    host: str = ""
    token: str = ""
    ca_file: Path = Path()
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def client(self):  # type: ignore[no-untyped-def]
        """An ``kubernetes.client.ApiClient`` for the admin user."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.host
        cfg.api_key = {"authorization": f"Bearer {self.token}"}
        cfg.ssl_ca_cert = str(self.ca_file)
        cfg.verify_ssl = True
        return client.ApiClient(cfg)

    def kubeconfig(self) -> Path:
        """A kubeconfig file for the admin user (for tools that read one)."""
        path = self.workdir / "kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters:\n- name: test\n  cluster:\n    server: {self.host}\n"
            f"    certificate-authority: {self.ca_file}\n"
            "users:\n- name: admin\n  user:\n"
            f"    token: {self.token}\n"
            "contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n"
            "    namespace: default\n")
        path.chmod(0o600)
        return path

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def start_apiserver(timeout: float = 120.0) -> ApiServer:
    """Start etcd and kube-apiserver on free loopback ports; wait until /readyz is ok."""
    bins = k8s_bin_dir()
    work = Path(tempfile.mkdtemp(prefix="opskit-k8s-"))
    srv = ApiServer(workdir=work)
    try:
        etcd_client, etcd_peer = free_port_block(1), free_port_block(1)
        etcd_log = open(work / "etcd.log", "wb")  # noqa: SIM115 - kept open for the process
        srv.procs.append(subprocess.Popen(
            [str(bins / "etcd"), "--name", "test", "--data-dir", str(work / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
             "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
             "--initial-cluster", f"test=http://127.0.0.1:{etcd_peer}",
             "--quota-backend-bytes", str(512 * 1024 * 1024), "--log-level", "warn"],
            stdout=etcd_log, stderr=subprocess.STDOUT, start_new_session=True))
        # service-account signing key; serving certificate signed by a CA of our own
        sa_key = work / "sa.key"
        _openssl("genrsa", "-out", str(sa_key), "2048")
        ca_key, ca_crt = work / "ca.key", work / "ca.crt"
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
                 "-out", str(ca_crt), "-days", "2", "-subj", "/CN=opskit-test-ca")
        srv_key, srv_csr, srv_crt = work / "srv.key", work / "srv.csr", work / "srv.crt"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(srv_key),
                 "-out", str(srv_csr), "-subj", "/CN=kube-apiserver")
        ext = work / "ext.cnf"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n")
        _openssl("x509", "-req", "-in", str(srv_csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
                 "-CAcreateserial", "-out", str(srv_crt), "-days", "2", "-extfile", str(ext))
        srv.token = secrets.token_hex(16)
        tokens = work / "tokens.csv"
        tokens.write_text(f'{srv.token},admin,admin,"system:masters"\n')
        port = free_port_block(1)
        api_log = open(work / "apiserver.log", "wb")  # noqa: SIM115 - kept open for the process
        srv.procs.append(subprocess.Popen(
            [str(bins / "kube-apiserver"),
             f"--etcd-servers=http://127.0.0.1:{etcd_client}",
             "--bind-address=127.0.0.1", f"--secure-port={port}",
             "--advertise-address=127.0.0.1",
             f"--tls-cert-file={srv_crt}", f"--tls-private-key-file={srv_key}",
             f"--client-ca-file={ca_crt}",
             f"--token-auth-file={tokens}",
             "--authorization-mode=RBAC",
             f"--service-account-key-file={sa_key}",
             f"--service-account-signing-key-file={sa_key}",
             "--service-account-issuer=https://kubernetes.default.svc",
             "--service-cluster-ip-range=10.96.0.0/16",
             "--enable-priority-and-fairness=false",
             "--watch-cache=false",
             f"--cert-dir={work / 'certs'}"],
            stdout=api_log, stderr=subprocess.STDOUT, start_new_session=True))
        srv.host, srv.ca_file = f"https://127.0.0.1:{port}", ca_crt
        _wait_ready(srv, timeout)
        return srv
    except BaseException:  # noqa: BLE001 - stop what started, then re-raise as one error
        logs = ""
        for name in ("etcd.log", "apiserver.log"):
            f = work / name
            if f.exists():
                logs += f"\n--- {name}\n" + f.read_text(errors="replace")[-3000:]
        srv.stop()
        raise RuntimeError(f"the test API server did not start{logs}") from None


def _wait_ready(srv: ApiServer, timeout: float) -> None:
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(srv.ca_file))
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        for p in srv.procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited with {p.returncode}")
        req = urllib.request.Request(f"{srv.host}/readyz",
                                     headers={"Authorization": f"Bearer {srv.token}"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError as e:
            last = str(e)
        time.sleep(0.5)
    raise RuntimeError(f"kube-apiserver not ready after {timeout:.0f} s ({last})")


if __name__ == "__main__":  # manual check: start, print, stop on Enter
    s = start_apiserver()
    print(s.host, s.kubeconfig(), os.getpid())
    try:
        input("running; Enter stops it\n")
    finally:
        s.stop()
