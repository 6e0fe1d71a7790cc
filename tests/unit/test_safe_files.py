"""The shared file writer and reader: refuse non-regular targets, fail failed
writes, bound what is read, one-line errors."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from opskit.adapters.files.safe_read import (
    MAX_SECRET_BYTES,
    parse_json,
    parse_yaml,
    read_bytes,
    read_secret,
    read_text,
)
from opskit.adapters.files.safe_write import check_writable_target, write_file
from opskit.cli import exits
from opskit.errors import InvalidInputError, NotFoundError, WriteFailedError


def test_write_creates_replaces_and_keeps_mode(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b.json"
    write_file(p, "one\n")
    assert p.read_text() == "one\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    os.chmod(p, 0o640)
    write_file(p, b"two\n")
    assert p.read_text() == "two\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    write_file(p, "three\n", mode=0o644)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert sorted(x.name for x in p.parent.iterdir()) == ["b.json"]  # no temp file left


def test_write_follows_a_symlink_to_a_regular_file(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("old")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    write_file(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "new"


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
@pytest.mark.parametrize("minor", [3, 5, 7])  # like /dev/null, /dev/zero, /dev/full
def test_write_refuses_devices(tmp_path: Path, minor: int) -> None:
    # a node inside tmp: were the writer to regress, only this node could be replaced
    dev = tmp_path / "dev"
    os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, minor))
    with pytest.raises(InvalidInputError, match="not a regular file"):
        write_file(dev, "x")
    after = os.stat(dev)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == os.makedev(1, minor)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev"]


def test_write_refuses_fifo_socket_directory_and_symlinks_to_them(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    d = tmp_path / "dir"
    d.mkdir()
    link = tmp_path / "link"
    link.symlink_to(fifo)
    try:
        for target, msg in [(fifo, "a FIFO"), (sock_path, "a socket"), (d, "a directory"),
                            (link, "a FIFO")]:
            with pytest.raises(InvalidInputError, match=msg):
                write_file(target, "x")
        assert stat.S_ISFIFO(fifo.stat().st_mode) and stat.S_ISSOCK(sock_path.stat().st_mode)
        assert link.is_symlink() and d.is_dir() and list(d.iterdir()) == []
        with pytest.raises(InvalidInputError):
            check_writable_target("", "plan")
    finally:
        s.close()


def test_a_failed_write_fails_and_leaves_the_old_file(tmp_path: Path) -> None:
    """A real failing write: a file-size limit makes write(2) fail with EFBIG
    (run in a child so the limit does not touch the test process)."""
    target = tmp_path / "state.json"
    target.write_text("old\n")
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "from opskit.adapters.files.safe_write import write_file\n"
        "from opskit.errors import WriteFailedError\n"
        "try:\n"
        f"    write_file({str(target)!r}, 'x' * 100000)\n"
        "except WriteFailedError as e:\n"
        "    print(e); sys.exit(8)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       check=False,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert r.returncode == 8, r.stderr
    assert "cannot write file" in r.stdout and "nothing was replaced" in r.stdout
    assert target.read_text() == "old\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["state.json"]


def test_write_failed_has_its_own_documented_exit_code() -> None:
    assert exits.exit_code_for(WriteFailedError("x")) == exits.WRITE_FAILED == 8
    assert exits.WRITE_FAILED in exits.DOCUMENTED and exits.INTERNAL not in exits.DOCUMENTED


@contextmanager
def _endless_fifo(path: Path) -> Iterator[Path]:
    """A FIFO that never ends while the block runs (a writer keeps it full)."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # holds a reader too: writes never fail
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            try:
                os.write(fd, b"0" * 65536)
            except BlockingIOError:
                stop.wait(0.001)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        stop.set()
        writer.join(10)
        os.close(fd)


def test_read_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        read_text(tmp_path / "missing", "plan")
    with pytest.raises(InvalidInputError, match="is a directory"):
        read_text(tmp_path, "plan")
    with pytest.raises(InvalidInputError, match="a device, not a file"):
        read_bytes("/dev/zero", "state file")  # /dev/null would read as an empty file
    with _endless_fifo(tmp_path / "endless") as endless, \
            pytest.raises(InvalidInputError, match="larger than 1 MiB"):
        read_bytes(endless, "state file", max_bytes=1024 * 1024)
    utf16 = tmp_path / "u16"
    utf16.write_text("password", encoding="utf-16")
    binary = tmp_path / "bin"
    binary.write_bytes(bytes(range(256)))
    for p in (utf16, binary):
        with pytest.raises(InvalidInputError, match="not UTF-8 text"):
            read_text(p, "key file")
    bom = tmp_path / "bom"
    bom.write_bytes(b"\xef\xbb\xbfhello")
    assert read_text(bom) == "hello"
    with pytest.raises(InvalidInputError):
        read_text("bad\x00path")


def test_read_does_not_block_on_a_fifo_without_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_text(fifo) == ""


def test_secrets(tmp_path: Path) -> None:
    p = tmp_path / "pw"
    p.write_text("s3cret\n")
    assert read_secret(p) == "s3cret"
    p.write_text("\n  \n")
    with pytest.raises(InvalidInputError, match="is empty"):
        read_secret(p, "password file")
    p.write_text("a\nb\n")
    with pytest.raises(InvalidInputError, match="more than one line"):
        read_secret(p)
    p.write_text("x" * (MAX_SECRET_BYTES + 1))
    with pytest.raises(InvalidInputError, match="larger than 64 KiB"):
        read_secret(p)


def test_parsers_turn_every_failure_into_one_line() -> None:
    deep_json = "[" * 200_000 + "]" * 200_000
    deep_yaml = "[" * 50_000 + "]" * 50_000
    cases = [
        (parse_json, deep_json), (parse_json, "{"), (parse_json, "9" * 5000),
        (parse_yaml, deep_yaml), (parse_yaml, "a: [\n"), (parse_yaml, "a: !!python/object x"),
        (parse_yaml, "a: " + "9" * 5000),
    ]
    for fn, text in cases:
        with pytest.raises(InvalidInputError) as ei:
            fn(text, "doc")
        assert "\n" not in str(ei.value) and str(ei.value).startswith("doc ")
    assert parse_json(json.dumps({"a": [1]}), "doc") == {"a": [1]}
    assert parse_yaml("a: 1", "doc") == {"a": 1}
