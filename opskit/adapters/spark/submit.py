"""Spark I/O for ``opskit replay``: the Kafka connector jars and ``spark-submit``.

Spark's Kafka source (``spark-sql-kafka-0-10``) is not in the PySpark wheel. It
is resolved from Maven Central with Maven (``spark_jobs/spark-kafka-jars.xml``)
into ``<cache>/spark-jars/<pyspark version>/`` and passed to ``spark-submit``
explicitly with ``--jars``, so a run uses exactly the jars listed in the
directory's ``jars.txt`` (also recorded in the replay manifest).

The connector version is the PySpark version whenever Maven Central has it.
When it does not (PySpark 4.3.0 is on PyPI, but neither
``spark-sql-kafka-0-10_2.13:4.3.0`` nor ``spark-token-provider-kafka-0-10_2.13``
newer than 4.0.0 is on Central when this was written), the pinned fallback of
``FALLBACKS`` is used and ``jars.txt`` says so; a connector of an *older* minor
version than that (4.0.0 with PySpark 4.3.0) fails at run time with
``ClassNotFoundException: org.apache.spark.internal.LogKeys$...``.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from opskit.adapters.spark.guard import GRACE_SECONDS
from opskit.errors import SandboxError, UnsupportedError, UsageError
from opskit.paths import cache_dir

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[3]
POM = ROOT / "spark_jobs" / "spark-kafka-jars.xml"
JOB = ROOT / "spark_jobs" / "lag_replay.py"
#: artifacts passed to --jars (everything else the connector needs ships with PySpark)
ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13",
             "kafka-clients", "commons-pool2")
#: PySpark version -> (connector, token provider) to use when Maven Central lacks the
#: exact version. Checked by hand against Maven Central; tested with PySpark 4.3.0.
FALLBACKS: dict[str, tuple[str, str]] = {
    "4.3.0": ("4.2.0", "4.0.0"),
}
#: the throughput collector for the driver and executors (unless ``--conf`` sets
#: their ``extraJavaOptions``): with G1, Java's default, the replay of 1M records
#: used about a fifth more CPU on a 2-core machine (docs/replay.md, "Benchmark")
GC_OPTION = "-XX:+UseParallelGC"
#: suffix of the class-data-sharing archive while a run is writing it
CDS_PARTIAL = ".partial-"
#: the result line the job prints on the driver's stdout
RESULT_PREFIX = "OPSKIT_RESULT "
PROGRESS_PREFIX = "OPSKIT_PROGRESS "


#: the one-line error when pyspark (the optional extra ``replay``) is missing
MISSING_EXTRA = ("running a replay needs pyspark, the optional extra 'replay': "
                 "pip install 'opskit[replay]'")


def require_replay_extra() -> None:
    """UnsupportedError (exit 3) naming the extra when pyspark is not installed,
    checked before a replay starts any work (the import itself waits for the job)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("pyspark") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UnsupportedError(MISSING_EXTRA)


def pyspark_version() -> str:
    try:
        import pyspark
    except ImportError as e:
        raise UnsupportedError(MISSING_EXTRA) from e
    return str(pyspark.__version__)


@dataclass(frozen=True)
class SparkJars:
    """The connector jars of one PySpark version."""

    pyspark: str
    connector: str
    token_provider: str
    jars: tuple[Path, ...]

    @property
    def exact(self) -> bool:
        return self.connector == self.pyspark and self.token_provider == self.pyspark

    def to_dict(self) -> dict[str, object]:
        return {"pyspark": self.pyspark, "connector": self.connector,
                "token_provider": self.token_provider, "exact_match": self.exact,
                "jars": [p.name for p in self.jars]}


def jars_dir(version: str) -> Path:
    return cache_dir() / "spark-jars" / version


def cached_jars(target: Path, version: str) -> SparkJars | None:
    """The jars listed in ``target/jars.txt``, or None unless every one is there."""
    listing = target / "jars.txt"
    if not listing.exists():
        return None
    fields: dict[str, str] = {}
    jars: list[Path] = []
    for line in listing.read_text().splitlines():
        if line.startswith("#") and "=" in line:
            k, _, v = line[1:].strip().partition("=")
            fields[k.strip()] = v.strip()
        elif line.strip():
            jars.append(target / "libs" / line.strip())
    if not jars or not all(j.exists() for j in jars):
        return None
    return SparkJars(version, fields.get("connector", version),
                     fields.get("token_provider", version), tuple(jars))


def _mvn_copy(target: Path, connector: str, token: str) -> tuple[Path, ...] | str:
    """Run Maven; the jars, or the first error line."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UnsupportedError("mvn not found on PATH: the Spark Kafka connector is resolved "
                               "from Maven Central with Maven; run scripts/install-spark.sh")
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        out = Path(tmp) / "libs"
        cmd = [mvn, "-q", "-B", "-U", "-f", str(POM), "dependency:copy-dependencies",
               f"-Dconnector.version={connector}", f"-Dtoken.provider.version={token}",
               f"-DoutputDirectory={out}", "-DincludeScope=runtime",
               f"-DincludeArtifactIds={','.join(ARTIFACTS)}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
        except subprocess.TimeoutExpired:
            return "Maven did not finish in 20 minutes"
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln]
            return lines[0].strip() if lines else (proc.stdout + proc.stderr).strip()[-300:]
        libs = target / "libs"
        if libs.exists():
            shutil.rmtree(libs)
        os.replace(out, libs)
    return tuple(sorted(libs.glob("*.jar")))


def ensure_spark_jars(version: str | None = None) -> SparkJars:
    """The cached connector jars for ``version`` (default: installed PySpark),
    resolving them with Maven on first use."""
    version = version or pyspark_version()
    target = jars_dir(version)
    cached = cached_jars(target, version)
    if cached is not None:
        return cached
    target.mkdir(parents=True, exist_ok=True)
    attempts = [(version, version)]
    if version in FALLBACKS:
        attempts.append(FALLBACKS[version])
    errors: list[str] = []
    for connector, token in attempts:
        log.info("resolving spark-sql-kafka %s (token provider %s) from Maven Central",
                 connector, token)
        got = _mvn_copy(target, connector, token)
        if isinstance(got, str):
            errors.append(f"{connector}: {got}")
            continue
        names = [j.name for j in got]
        missing = [a for a in ARTIFACTS if not any(n.startswith(a + "-") for n in names)]
        if missing:
            errors.append(f"{connector}: Maven gave no {', '.join(missing)}")
            continue
        note = "" if connector == version else (
            f"# note=Maven Central has no spark-sql-kafka {version}; pinned fallback\n")
        (target / "jars.txt").write_text(
            f"# pyspark={version}\n# connector={connector}\n# token_provider={token}\n{note}"
            + "".join(n + "\n" for n in names))
        jars = cached_jars(target, version)
        assert jars is not None
        return jars
    raise SandboxError(f"cannot resolve the Spark Kafka connector for PySpark {version} from "
                       f"Maven Central: {'; '.join(errors)}")


def spark_submit_binary() -> str:
    found = shutil.which("spark-submit")
    if found:
        return found
    try:
        import pyspark
    except ImportError as e:
        raise UnsupportedError(MISSING_EXTRA) from e
    candidate = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if candidate.exists():
        return str(candidate)
    raise UnsupportedError(f"spark-submit not found on PATH or in pyspark ({MISSING_EXTRA})")


@dataclass(frozen=True)
class SubmitOptions:
    master: str = "local[2]"
    deploy_mode: str | None = None
    driver_memory: str = "1g"
    executor_memory: str | None = None
    conf: tuple[tuple[str, str], ...] = ()


#: Spark's own message when ``spark-submit`` refuses a Python application in cluster
#: deploy mode on a standalone master (``SparkSubmit``; checked by a test)
STANDALONE_PYTHON_CLUSTER_REFUSAL = ("Cluster deploy mode is currently not supported for "
                                     "python applications on standalone clusters")


def deploy_mode_of(opts: SubmitOptions) -> str:
    """``client`` or ``cluster``, as spark-submit will see it (flag, then --conf)."""
    return opts.deploy_mode or dict(opts.conf).get("spark.submit.deployMode") or "client"


def check_submittable(opts: SubmitOptions) -> None:
    """Refuse, before anything is planned, a master and deploy mode that
    spark-submit refuses for a Python job.

    A standalone master (``spark://``) in cluster deploy mode: Spark's standalone
    cluster mode starts the driver on a worker through a JVM main class only; for
    a ``.py`` application ``spark-submit`` stops with "Cluster deploy mode is
    currently not supported for python applications on standalone clusters"
    (PySpark 4.3; docs/replay.md)."""
    if deploy_mode_of(opts) != "cluster":
        return
    if opts.master.startswith("spark://"):
        raise UsageError(
            "--deploy-mode cluster is not possible with a standalone master (spark://): "
            "Spark does not run Python applications in cluster deploy mode on standalone "
            "clusters; use --deploy-mode client (the driver runs here, the tasks on the "
            "workers) or a k8s:// master")
    if opts.master.startswith("local"):
        raise UsageError("--deploy-mode cluster needs a cluster master (k8s://...), "
                         f"not {opts.master!r}")


def cds_archive(jars: SparkJars, opts: SubmitOptions | None = None) -> Path:
    """The driver JVM's class-data-sharing archive for this PySpark version: one for
    local masters (the driver runs the tasks too) and one for client-mode drivers of a
    cluster (standalone, Kubernetes client mode), which load fewer classes."""
    local = opts is None or opts.master.startswith("local")
    return jars_dir(jars.pyspark) / ("driver-classes.jsa" if local else
                                     "driver-classes-client.jsa")


#: a partial class archive older than this was left by a driver that was killed while
#: writing it, or whose run failed before opskit could move it into place (the JVM
#: writes the file in seconds, at exit)
STALE_PARTIAL_SECONDS = 3600.0


def drop_stale_partial_archives(archive: Path, now: float | None = None) -> list[Path]:
    """Delete partial class archives of ``archive`` older than an hour (a killed
    replay leaves one of up to 200 MB); the deleted paths. Called on every run
    whose driver uses an archive, whether or not the archive is written."""
    now = time.time() if now is None else now
    dropped: list[Path] = []
    for partial in archive.parent.glob(archive.name + CDS_PARTIAL + "*"):
        try:
            if now - partial.stat().st_mtime > STALE_PARTIAL_SECONDS:
                partial.unlink()
                dropped.append(partial)
        except OSError:
            continue
    return dropped


def driver_java_options(jars: SparkJars, opts: SubmitOptions) -> list[str]:
    """JVM options of the driver.

    Whenever the driver runs on this machine (client deploy mode: a local master, or a
    standalone or Kubernetes master in client mode) it uses a class-data-sharing
    archive (Java's AppCDS) of the classes a replay loads: the first run writes it at
    exit (``-XX:ArchiveClassesAtExit``), later runs map it (``-XX:SharedArchiveFile``)
    instead of loading and verifying several thousand classes from the jars, which
    saved about 5 s of CPU per run on a 2-core machine. An archive the JVM cannot use
    (another Java build) is ignored by the JVM; deleting the file makes the next run
    write a new one. A driver in a pod (cluster deploy mode) gets none."""
    flags = [GC_OPTION]
    if deploy_mode_of(opts) == "client":
        archive = cds_archive(jars, opts)
        drop_stale_partial_archives(archive)
        if archive.exists():
            flags.append(f"-XX:SharedArchiveFile={archive}")
        else:
            # a unique name: run_spark_submit moves it into place after a clean exit
            flags.append(f"-XX:ArchiveClassesAtExit={archive}{CDS_PARTIAL}{uuid.uuid4().hex[:8]}")
        flags.append("-Xlog:cds=off,cds+dynamic=off")  # no per-class warnings on stderr
    return flags


def _adopt_cds_archive(cmd: Sequence[str], ok: bool) -> None:
    """Move a class-data-sharing archive written by this run into place."""
    for arg in cmd:
        for flag in arg.split():
            if not flag.startswith("-XX:ArchiveClassesAtExit="):
                continue
            partial = Path(flag.partition("=")[2])
            final = Path(str(partial).rpartition(CDS_PARTIAL)[0])
            try:
                if ok and partial.exists() and not final.exists():
                    os.replace(partial, final)
                else:
                    partial.unlink(missing_ok=True)
            except OSError as e:
                log.warning("cannot keep the driver class archive %s: %s", partial, e)


def build_command(jars: SparkJars, opts: SubmitOptions, job_args: Sequence[str],
                  job: Path | str = JOB, ship_jars: bool = True) -> list[str]:
    """The exact ``spark-submit`` command line (also shown to the operator).
    ``job``: another file of ``spark_jobs/`` (the benchmark's read-only baseline), or a
    URI the driver pod reads (``local://`` in the image). ``ship_jars`` False: the
    connector jars are already in the image (Kubernetes), nothing is uploaded."""
    cmd = [spark_submit_binary(), "--master", opts.master, "--name", "opskit-lag-replay"]
    if ship_jars:
        cmd += ["--jars", ",".join(str(j) for j in jars.jars)]
    cmd += ["--driver-memory", opts.driver_memory]
    if opts.deploy_mode:
        cmd += ["--deploy-mode", opts.deploy_mode]
    if opts.executor_memory:
        cmd += ["--executor-memory", opts.executor_memory]
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
            "spark.driver.extraJavaOptions": " ".join(driver_java_options(jars, opts)),
            "spark.executor.extraJavaOptions": GC_OPTION}
    conf.update(dict(opts.conf))
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, str(job), *job_args]


@dataclass(frozen=True)
class SubmitResult:
    returncode: int
    result_line: str | None
    tail: str


def _close_quietly(stream: IO[str] | None) -> None:
    if stream is not None:
        try:
            stream.close()
        except OSError:
            pass


def stop_guarded(proc: subprocess.Popen[str]) -> None:
    """Close the guard's pipe (it then stops the job's process group) and wait for it;
    kill the guard's whole group if it does not finish in time."""
    _close_quietly(proc.stdin)
    try:
        proc.wait(timeout=GRACE_SECONDS + 5)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def run_spark_submit(cmd: Sequence[str], on_progress: Callable[[str], None],
                     timeout: float = 3600.0) -> SubmitResult:
    """Run ``spark-submit``; relay progress lines; return the job's result line."""
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # through the guard (opskit.adapters.spark.guard): its stdin is a pipe only this process
    # holds, so however opskit ends (Ctrl-C, SIGTERM, SIGKILL) the guard sees the pipe close
    # and stops spark-submit with everything it started; a session of its own keeps a
    # terminal's Ctrl-C for opskit to handle
    guarded = [sys.executable, "-m", "opskit.adapters.spark.guard", "--", *cmd]
    try:
        proc = subprocess.Popen(guarded, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    except OSError as e:
        raise UnsupportedError(f"cannot run spark-submit: {e}") from e
    tail: list[str] = []
    result: list[str] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.debug("spark: %s", line.rstrip())
            tail.append(line.rstrip())
            del tail[:-40]

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith(RESULT_PREFIX):
                result.append(line[len(RESULT_PREFIX):].strip())
            elif line.startswith(PROGRESS_PREFIX):
                on_progress(line[len(PROGRESS_PREFIX):].strip())
            else:
                log.debug("spark stdout: %s", line.rstrip())
        rc = proc.wait(timeout=timeout)
    except BaseException:
        # interrupted or timed out: the guard stops the job's whole process group
        stop_guarded(proc)
        raise
    _close_quietly(proc.stdin)
    t.join(5)
    _adopt_cds_archive(cmd, rc == 0)
    errors = [ln for ln in tail if "Error" in ln or "Exception" in ln]
    return SubmitResult(rc, result[-1] if result else None,
                        (errors[-1] if errors else (tail[-1] if tail else "")).strip())


def parse_conf(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise UsageError(f"--conf expects KEY=VALUE, not {item!r}")
        out.append((k, v))
    return tuple(out)


def _main(argv: list[str]) -> int:
    """``python -m opskit.adapters.spark.submit resolve [VERSION]``: fetch and cache the jars."""
    if not argv or argv[0] != "resolve":
        sys.stderr.write("usage: python -m opskit.adapters.spark.submit resolve [PYSPARK_VERSION]\n")
        return 2
    try:
        jars = ensure_spark_jars(argv[1] if len(argv) > 1 else None)
    except (SandboxError, UnsupportedError) as e:
        sys.stderr.write(f"spark jars: error: {e}\n")
        return 1
    match = "exact match" if jars.exact else (
        f"FALLBACK: connector {jars.connector}, token provider {jars.token_provider}")
    sys.stdout.write(f"PySpark {jars.pyspark} Kafka connector ({match}):\n")
    for j in jars.jars:
        sys.stdout.write(f"  {j}\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
