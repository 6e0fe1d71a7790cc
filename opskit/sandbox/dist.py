"""Apache Kafka distributions resolved from Maven Central and cached.

``ensure_kafka_dist("3.7")`` returns a directory of jars: the broker
(``org.apache.kafka:kafka_2.13``), the reference CLI tools (``kafka-tools``)
and all their runtime dependencies. The first call runs Maven once; later calls
only check the cache.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from opskit.errors import SandboxError, UnsupportedError, UsageError
from opskit.paths import cache_dir

log = logging.getLogger(__name__)

#: HIP-30's production version.
DEFAULT_VERSION = "3.7.2"
#: newest 4.x whose broker *and* tools jars are both on Maven Central.
NEWEST_4X = "4.3.1"
ALIASES = {
    "3.7": "3.7.2",
    "3": "3.7.2",
    "4": NEWEST_4X,
    "4.x": NEWEST_4X,
    "latest": NEWEST_4X,
    "4.3": NEWEST_4X,
}
SUPPORTED_SERIES = ("3.7", "3.8", "3.9", "4.0", "4.1", "4.2", "4.3")


def resolve_version(requested: str | None) -> str:
    """Map an alias (``3.7``, ``4.x``, ``latest``) to an exact version; validate the rest."""
    v = (requested or DEFAULT_VERSION).strip()
    v = ALIASES.get(v, v)
    parts = v.split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts) and v not in SUPPORTED_SERIES:
        raise UsageError(f"Kafka {v} is not supported by the sandbox (KRaft needs 3.7+; supported: "
                         f"{', '.join(SUPPORTED_SERIES)})")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise UsageError(f"invalid --kafka-version {requested!r}: expected X.Y.Z, 3.7 or 4.x")
    if ".".join(parts[:2]) not in SUPPORTED_SERIES:
        raise UsageError(
            f"Kafka {v} is not supported by the sandbox (KRaft needs 3.7+; supported: "
            f"{', '.join(SUPPORTED_SERIES)})"
        )
    return v


@dataclass(frozen=True)
class KafkaDist:
    version: str
    libs: Path

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @property
    def major_minor(self) -> tuple[int, int]:
        a, b, _ = self.version.split(".")
        return int(a), int(b)

    def _has_class(self, jar_prefix: str, cls: str) -> bool:
        entry = cls.replace(".", "/") + ".class"
        for jar in self.libs.glob(f"{jar_prefix}*.jar"):
            with zipfile.ZipFile(jar) as z:
                if entry in z.namelist():
                    return True
        return False

    @property
    def consumer_groups_class(self) -> str:
        """Main class of ``kafka-consumer-groups.sh`` (it moved to kafka-tools in 3.8)."""
        new = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
        return new if self._has_class("kafka-tools-", new) else "kafka.admin.ConsumerGroupCommand"

    def java_cmd(self, main_class: str, *args: str, log4j: Path | None = None,
                 heap: str = "256m", options: Sequence[str] | None = None) -> list[str]:
        """The java command line; ``options``: :func:`jvm_options` when the caller already
        read them (else read here)."""
        opts = jvm_options() if options is None else options
        cmd = [java_binary(), f"-Xmx{heap}", *opts, "-cp", self.classpath]
        if log4j is not None:
            cmd.append(f"-Dlog4j.configuration=file:{log4j}")
        else:
            cmd.append(f"-Dlog4j.configuration=file:{quiet_log4j()}")
        return [*cmd, main_class, *args]

    def run_tool(self, main_class: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's own CLI tools (as its .sh script would) and capture output."""
        return subprocess.run(
            self.java_cmd(main_class, *args), capture_output=True, text=True, timeout=timeout,
            check=False,
        )


def jvm_options() -> list[str]:
    """Extra JVM options for the sandbox's Kafka nodes and Kafka's own tools, from
    ``OPSKIT_SANDBOX_JVM_OPTS`` (split like a shell would). The test suite sets a
    light profile there (C1 only, the serial collector) to spend less CPU on a
    small machine; unset, the JVM's defaults apply (the nodes use G1)."""
    raw = os.environ.get("OPSKIT_SANDBOX_JVM_OPTS", "")
    try:
        opts = shlex.split(raw)
    except ValueError as e:
        raise UsageError(f"OPSKIT_SANDBOX_JVM_OPTS cannot be split into options: {e}") from None
    bad = [o for o in opts if not o.startswith("-")]
    if bad:
        raise UsageError(f"OPSKIT_SANDBOX_JVM_OPTS holds {bad[0]!r}, not a JVM option (they start with '-')")
    return opts


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise UnsupportedError(  # a component not installed: exit 3, naming the step
            "java not found on PATH: the sandbox runs Kafka as JVM processes; install a JDK 17+ "
            "(apt-get install openjdk-17-jre-headless) or run scripts/install.sh"
        )
    return java


def quiet_log4j() -> Path:
    """A log4j 1.x config that keeps Kafka's CLI tools quiet (warnings to stderr)."""
    p = cache_dir() / "log4j-tools.properties"
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(
            "log4j.rootLogger=WARN, stderr\n"
            "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.Target=System.err\n"
            "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
    return p


def dist_dir(version: str) -> Path:
    return cache_dir() / "kafka" / version


def ensure_kafka_dist(requested: str | None = None) -> KafkaDist:
    """Return the cached distribution, resolving it with Maven on first use."""
    version = resolve_version(requested)
    target = dist_dir(version)
    libs = target / "libs"
    marker = target / ".complete"
    if marker.exists() and any(libs.glob("kafka_2.13-*.jar")):
        return KafkaDist(version, libs)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UnsupportedError(
            "mvn not found on PATH: Kafka jars are resolved from Maven Central with Maven; "
            "install it (apt-get install maven) or run scripts/install.sh"
        )
    java_binary()
    target.mkdir(parents=True, exist_ok=True)
    pom = resources.files("opskit.sandbox").joinpath("kafka-dist.xml")
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        pom_path = Path(tmp) / "pom.xml"
        pom_path.write_text(pom.read_text())
        out = Path(tmp) / "libs"
        cmd = [
            mvn, "-q", "-B", "-f", str(pom_path), "dependency:copy-dependencies",
            f"-Dkafka.version={version}", f"-DoutputDirectory={out}", "-DincludeScope=runtime",
        ]
        log.info("resolving Kafka %s from Maven Central", version)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
        except subprocess.TimeoutExpired as e:
            raise SandboxError(f"Maven did not finish resolving Kafka {version} in 20 minutes") from e
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln]
            first = lines[0] if lines else (proc.stdout + proc.stderr).strip()[-300:]
            raise SandboxError(f"Maven could not resolve Kafka {version}: {first.strip()}")
        if libs.exists():
            shutil.rmtree(libs)
        os.replace(out, libs)
    marker.write_text(version + "\n")
    return KafkaDist(version, libs)


def _main(argv: list[str]) -> int:
    """``python -m opskit.sandbox.dist 3.7 4.x``: resolve and cache distributions."""
    for v in argv or [DEFAULT_VERSION]:
        d = ensure_kafka_dist(v)
        print(f"Kafka {d.version}: {d.libs}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
