"""The spark-submit command line and the cached connector jar list (no Spark run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opskit.adapters import spark_submit as ss
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
