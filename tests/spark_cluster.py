"""A real Spark standalone cluster on loopback, from the installed PySpark.

A master and N workers are started with PySpark's own launcher
(``bin/spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``; the PySpark wheel ships no ``sbin/start-master.sh``)
on 127.0.0.1, RPC and web UI ports free ports, small daemon and worker memory.
Each daemon runs in its own process group, and a worker's executors are its
children in that group, so ``stop()`` (and ``kill_worker``) leave no JVM behind.

Used by the session fixture ``spark_standalone`` (tests/conftest.py) and by
``benchmarks/bench_replay.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opskit.sandbox.ports import free_port_block, port_free

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    for _ in range(200):
        port = free_port_block(1)
        if port_free(port):
            return port
    raise RuntimeError("no free loopback port")


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    ui_port: int
    work_dir: Path | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Signal the daemon's whole process group (its executors included)."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


@dataclass
class SparkStandalone:
    """Master + workers. ``url`` is the ``spark://HOST:PORT`` to submit to."""

    base: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    daemon_memory: str = "256m"
    master: Daemon | None = None
    worker_daemons: list[Daemon] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _env(self) -> dict[str, str]:
        home = spark_home()
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.base / "logs"),
            "SPARK_LOCAL_DIRS": str(self.base / "local"),
            # executors would start this Python for Python work (the job has none)
            "PYSPARK_PYTHON": sys.executable,
        })
        env.pop("SPARK_CONF_DIR", None)
        return env

    def _spawn(self, name: str, cls: str, args: list[str], ui_port: int,
               work_dir: Path | None = None) -> Daemon:
        log = self.base / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self._env(),
                                    start_new_session=True)
        return Daemon(name, proc, log, ui_port, work_dir)

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        ui = _free_port()
        self.master = self._spawn("master", MASTER_CLASS,
                                  ["--host", HOST, "--port", str(self.port),
                                   "--webui-port", str(ui)], ui)
        for i in range(self.workers):
            self.worker_daemons.append(self._start_worker(i))
        try:
            self.wait_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_worker(self, i: int) -> Daemon:
        work = self.base / f"worker{i}"
        work.mkdir(parents=True, exist_ok=True)
        ui = _free_port()
        return self._spawn(f"worker{i}", WORKER_CLASS,
                           ["--host", HOST, "--port", "0", "--webui-port", str(ui),
                            "--cores", str(self.cores), "--memory", self.memory,
                            "--work-dir", str(work), self.url], ui, work)

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications, drivers)."""
        assert self.master is not None
        with urllib.request.urlopen(f"http://{HOST}:{self.master.ui_port}/json/",
                                    timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> list[dict[str, Any]]:
        try:
            st = self.state()
        except OSError:
            return []
        return [w for w in st.get("workers", []) if w.get("state") == "ALIVE"]

    def wait_workers(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in [self.master, *self.worker_daemons]:
                if d is not None and not d.alive():
                    raise RuntimeError(f"spark {d.name} exited: {d.log.read_text()[-2000:]}")
            if len(self.alive_workers()) >= count:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{count} Spark workers did not register in {timeout:.0f}s")

    def executor_dirs(self, i: int) -> list[Path]:
        """``<work dir>/<app id>/<executor id>`` of worker ``i``'s executors."""
        work = self.worker_daemons[i].work_dir
        assert work is not None
        return sorted(d for d in work.glob("app-*/*") if d.is_dir())

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` and its executors (a machine that dies)."""
        d = self.worker_daemons[i]
        d.kill_group(signal.SIGKILL)
        d.proc.wait(30)

    def restart_worker(self, i: int, timeout: float = 120.0) -> None:
        if self.worker_daemons[i].alive():
            return
        self.worker_daemons[i] = self._start_worker(i)
        self.wait_workers(self.workers, timeout)

    def stop(self) -> None:
        """SIGTERM every daemon (a worker then kills its executors), SIGKILL what is left."""
        daemons = [*self.worker_daemons, *([self.master] if self.master else [])]
        for d in daemons:
            d.kill_group(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for d in daemons:
            try:
                d.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for d in daemons:
            d.kill_group(signal.SIGKILL)  # executors still in the group, or a stuck JVM
            try:
                d.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.worker_daemons = []
        self.master = None


def start_standalone(workers: int = 2, cores: int = 1, memory: str = "1g",
                     base: Path | None = None) -> SparkStandalone:
    base = base or Path(tempfile.mkdtemp(prefix="opskit-spark-"))
    return SparkStandalone(base, workers=workers, cores=cores, memory=memory).start()
