"""The spark-submit command line and the cached connector jar list (no Spark run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from opskit.adapters.spark import submit as ss
from opskit.errors import UsageError


def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: list[str],
           header: str) -> Path:
    monkeypatch.setenv("OPSKIT_CACHE", str(tmp_path))
    target = tmp_path / "spark-jars" / "9.9.9"
    (target / "libs").mkdir(parents=True)
    for n in names:
        (target / "libs" / n).write_bytes(b"PK")
    (target / "jars.txt").write_text(header + "".join(n + "\n" for n in names))
    return target


NAMES = ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
         "spark-sql-kafka-0-10_2.13-9.8.0.jar", "spark-token-provider-kafka-0-10_2.13-9.0.0.jar"]


def test_cached_jars_are_used_exactly_and_fallback_is_visible(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    target = _cache(tmp_path, monkeypatch, NAMES,
                    "# pyspark=9.9.9\n# connector=9.8.0\n# token_provider=9.0.0\n")
    jars = ss.ensure_spark_jars("9.9.9")  # no Maven call: the cache is complete
    assert [j.name for j in jars.jars] == NAMES
    assert not jars.exact and jars.connector == "9.8.0"
    assert jars.to_dict()["exact_match"] is False
    cmd = ss.build_command(jars, ss.SubmitOptions(master="spark://m:7077", deploy_mode="client",
                                                  conf=(("spark.executor.instances", "3"),)),
                           ["--spec", "{}"])
    jar_arg = cmd[cmd.index("--jars") + 1].split(",")
    assert jar_arg == [str(target / "libs" / n) for n in NAMES]
    assert cmd[cmd.index("--master") + 1] == "spark://m:7077"
    assert "spark.executor.instances=3" in cmd and "spark.ui.enabled=false" in cmd
    assert cmd[-3:] == [str(ss.JOB), "--spec", "{}"]
    assert ss.JOB.exists()


def test_incomplete_cache_is_not_trusted(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    target = _cache(tmp_path, monkeypatch, NAMES, "# pyspark=9.9.9\n")
    (target / "libs" / NAMES[1]).unlink()
    assert ss.cached_jars(target, "9.9.9") is None


def test_parse_conf() -> None:
    assert ss.parse_conf(["a=b", "c.d=e=f"]) == (("a", "b"), ("c.d", "e=f"))
    with pytest.raises(UsageError):
        ss.parse_conf(["novalue"])


def _java_options(cmd: list[str], who: str) -> list[str]:
    key = f"spark.{who}.extraJavaOptions="
    found = [a[len(key):] for a in cmd if a.startswith(key)]
    assert len(found) == 1, cmd
    return found[0].split()


def test_local_driver_writes_then_uses_a_class_archive(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    _cache(tmp_path, monkeypatch, NAMES, "# pyspark=9.9.9\n# connector=9.8.0\n")
    jars = ss.ensure_spark_jars("9.9.9")
    archive = ss.cds_archive(jars)
    first = ss.build_command(jars, ss.SubmitOptions(master="local[2]"), [])
    opts = _java_options(first, "driver")
    assert "-XX:+UseParallelGC" in opts and _java_options(first, "executor") == ["-XX:+UseParallelGC"]
    writing = [o.partition("=")[2] for o in opts if o.startswith("-XX:ArchiveClassesAtExit=")]
    assert len(writing) == 1 and writing[0].startswith(str(archive) + ss.CDS_PARTIAL)
    # a failed run leaves no archive; a clean one moves the written file into place
    Path(writing[0]).write_bytes(b"jsa")
    ss._adopt_cds_archive(first, ok=False)
    assert not Path(writing[0]).exists() and not archive.exists()
    Path(writing[0]).write_bytes(b"jsa")
    ss._adopt_cds_archive(first, ok=True)
    assert archive.read_bytes() == b"jsa" and not Path(writing[0]).exists()
    later = _java_options(ss.build_command(jars, ss.SubmitOptions(master="local[2]"), []), "driver")
    assert f"-XX:SharedArchiveFile={archive}" in later
    assert not any(o.startswith("-XX:ArchiveClassesAtExit") for o in later)


def test_remote_driver_and_own_java_options_get_no_archive(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    _cache(tmp_path, monkeypatch, NAMES, "# pyspark=9.9.9\n# connector=9.8.0\n")
    jars = ss.ensure_spark_jars("9.9.9")
    remote = ss.build_command(jars, ss.SubmitOptions(master="k8s://https://k:6443",
                                                     deploy_mode="cluster"), [])
    assert _java_options(remote, "driver") == ["-XX:+UseParallelGC"]
    # a standalone master in client mode: the driver runs here, with an archive of its own
    client = _java_options(ss.build_command(jars, ss.SubmitOptions(
        master="spark://127.0.0.1:7077", deploy_mode="client"), []), "driver")
    writing = [o.partition("=")[2] for o in client if o.startswith("-XX:ArchiveClassesAtExit=")]
    own_archive = ss.cds_archive(jars, ss.SubmitOptions(master="spark://127.0.0.1:7077"))
    assert len(writing) == 1 and writing[0].startswith(str(own_archive) + ss.CDS_PARTIAL)
    assert own_archive != ss.cds_archive(jars, ss.SubmitOptions(master="local[2]"))
    own = ss.build_command(jars, ss.SubmitOptions(
        master="local[2]", conf=(("spark.driver.extraJavaOptions", "-Xss4m"),)), [])
    assert _java_options(own, "driver") == ["-Xss4m"]


def test_missing_pyspark_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the 'replay' extra, --execute fails at once with one line naming it
    (exit 3), before connecting to Kafka; a dry run does not need pyspark."""
    from opskit.cli import exits
    from tests.helpers import run_cli

    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark -> ImportError
    r = run_cli("replay", "-g", "g", "-t", "t", "-b", "127.0.0.1:1", "--timeout", "1",
                "--execute", "--yes")
    assert r.code == exits.UNKNOWN
    assert r.err == ("opskit: error: running a replay needs pyspark, the optional extra "
                     "'replay': pip install 'opskit[replay]'\n")
    r = run_cli("replay", "-g", "g", "-t", "t", "-b", "127.0.0.1:1", "--timeout", "1")
    assert r.code == exits.UNKNOWN and "cannot reach Kafka" in r.err  # got past the check


@pytest.mark.parametrize(("master", "mode", "conf", "refused"), [
    ("spark://m:7077", "cluster", (), "standalone"),
    ("spark://m:7077", None, (("spark.submit.deployMode", "cluster"),), "standalone"),
    ("local[2]", "cluster", (), "cluster master"),
    ("spark://m:7077", "client", (), None),
    ("spark://m:7077", None, (), None),
    ("k8s://https://k:6443", "cluster", (), None),
])
def test_deploy_modes_spark_submit_refuses_are_refused_first(  # type: ignore[no-untyped-def]
        master, mode, conf, refused):
    opts = ss.SubmitOptions(master=master, deploy_mode=mode, conf=conf)
    if refused is None:
        ss.check_submittable(opts)
        return
    with pytest.raises(UsageError, match=refused) as e:
        ss.check_submittable(opts)
    assert "\n" not in str(e.value)


def test_stale_partial_archives_are_dropped_fresh_ones_kept(tmp_path):  # type: ignore[no-untyped-def]
    archive = tmp_path / "driver-classes.jsa"
    old = tmp_path / f"driver-classes.jsa{ss.CDS_PARTIAL}aaaa1111"
    fresh = tmp_path / f"driver-classes.jsa{ss.CDS_PARTIAL}bbbb2222"
    other = tmp_path / f"driver-classes-client.jsa{ss.CDS_PARTIAL}cccc3333"
    for f in (old, fresh, other):
        f.write_bytes(b"jsa")
    now = 1_800_000_000.0
    os.utime(old, (now - 2 * ss.STALE_PARTIAL_SECONDS,) * 2)
    os.utime(other, (now - 2 * ss.STALE_PARTIAL_SECONDS,) * 2)
    os.utime(fresh, (now - 60,) * 2)
    assert ss.drop_stale_partial_archives(archive, now) == [old]
    assert not old.exists() and fresh.exists() and other.exists()
