"""The one way opskit reads a file the user names: bounded, text, one-line errors.

Config, key, password, plan, backup, manifest, snapshot and state files all go
through :func:`read_text`, and their JSON or YAML through :func:`parse_json` /
:func:`parse_yaml`, so that every bad file ends in one
:class:`~opskit.errors.OpskitError` with a one-line message:

- missing: :class:`~opskit.errors.NotFoundError` (exit 4);
- a directory, a device (``/dev/null`` would read as an empty file), unreadable,
  larger than the bound (an endless ``/dev/zero``-like
  path is read only up to the bound), not UTF-8 (binary, UTF-16), containing NUL
  bytes, JSON or YAML that does not parse or nests too deeply:
  :class:`~opskit.errors.InvalidInputError` (exit 2).

Opening does not block on a FIFO without a writer (it is opened non-blocking,
then read blocking: ``--password-file <(pass show kafka)`` still works).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from opskit import redact
from opskit.errors import InvalidInputError, NotFoundError

#: bound for documents (plans, backups, snapshots, manifests, config): 64 MiB
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: bound for secrets (keys, passwords, tokens): 64 KiB
MAX_SECRET_BYTES = 64 * 1024

_CHUNK = 1024 * 1024


def read_bytes(path: Path | str, what: str = "file", max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """At most ``max_bytes`` of ``path``, or an OpskitError (see the module doc)."""
    p = str(path)
    if p == "":
        raise InvalidInputError(f"{what} path is empty")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(f"{what} {p} does not exist") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise InvalidInputError(f"cannot read {what} {p}: {_reason(e)}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InvalidInputError(f"cannot read {what} {p}: it is a directory")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):  # /dev/null reads as empty
            raise InvalidInputError(f"cannot read {what} {p}: it is a device, not a file")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise InvalidInputError(
                    f"{what} {p} is larger than {_size(max_bytes)} (is it the right file?)")
        return b"".join(chunks)
    except OSError as e:
        raise InvalidInputError(f"cannot read {what} {p}: {_reason(e)}") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, what: str = "file", max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The UTF-8 text of ``path`` (a UTF-8 byte-order mark is dropped)."""
    raw = read_bytes(path, what, max_bytes)
    return decode_text(raw, f"{what} {path}")


def decode_text(raw: bytes, what: str) -> str:
    if b"\x00" in raw:
        raise InvalidInputError(f"{what} contains NUL bytes (binary or UTF-16?): not UTF-8 text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInputError(
            f"{what} is not UTF-8 text (byte {e.start}: binary or UTF-16?)") from None
    return text.removeprefix("\ufeff")


def read_secret(path: Path | str, what: str = "secret file") -> str:
    """A key, password or token file: stripped text, at most 64 KiB, not empty."""
    value = read_text(path, what, MAX_SECRET_BYTES).strip()
    if not value:
        raise InvalidInputError(f"{what} {path} is empty")
    if "\n" in value or "\r" in value:
        raise InvalidInputError(f"{what} {path} holds more than one line")
    redact.register(value)  # masked in every log record from now on
    return value


def parse_json(text: str, what: str) -> Any:
    """``json.loads`` with one-line errors (syntax, too deep, numbers too long)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{what} is not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise InvalidInputError(f"{what} nests too deeply to be read") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise InvalidInputError(f"{what} is not usable JSON: {_first_line(e)}") from None


#: deepest ``[``/``{`` nesting parse_yaml reads (PyYAML's scanner is quadratic in it,
#: and its composer recurses about three frames per level)
MAX_YAML_FLOW_DEPTH = 200
_FLOW = re.compile(r"[\[\]{}]")


def _flow_depth_over(text: str, limit: int) -> bool:
    """Whether ``[``/``{`` nest deeper than ``limit`` (quotes are not parsed: brackets
    inside strings count too, which only makes the bound stricter)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _FLOW.finditer(text):
        depth += 1 if m.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def parse_yaml(text: str, what: str) -> Any:
    """``yaml.safe_load`` with one-line errors (syntax, too deep, bad values)."""
    import yaml

    if _flow_depth_over(text, MAX_YAML_FLOW_DEPTH):
        raise InvalidInputError(f"{what} nests too deeply to be read "
                                f"(more than {MAX_YAML_FLOW_DEPTH} levels)")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "syntax error"
        raise InvalidInputError(f"{what}{where}: invalid YAML ({problem})") from None
    except RecursionError:
        raise InvalidInputError(f"{what} nests too deeply to be read") from None
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidInputError(f"{what} is not usable YAML: {_first_line(e)}") from None


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return _first_line(e)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def _size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    return f"{n // 1024} KiB"
