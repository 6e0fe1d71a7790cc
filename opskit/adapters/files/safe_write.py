"""The one way opskit writes a file: atomically, and only over a regular file.

Every file opskit writes (snapshots, backups, plans, journals, manifests, state,
the config file, generated rules) goes through :func:`write_file`:

- the target must be absent or a regular file: a device (``/dev/full``,
  ``/dev/null``), a FIFO, a socket or a directory given as the target is refused
  with :class:`~opskit.errors.InvalidInputError` (exit 2) and left untouched;
- a symlink is followed: the file it points to is replaced, the link stays (a
  symlink to something that is not a regular file is refused as above);
- the data goes to a temporary file in the same directory, is flushed and
  fsynced, then renamed over the target (a reader sees the old or the new file,
  whole), then the directory is fsynced;
- any failure of that (disk full, permission denied, read-only file system, file
  size limit) raises :class:`~opskit.errors.WriteFailedError` (exit 8), the
  temporary file is removed and the target is unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path

from opskit.errors import InvalidInputError, WriteFailedError

#: permission bits of a new file when the caller gives none (owner only: backups,
#: journals and state can name groups and hosts)
DEFAULT_MODE = 0o600


def safe_file_name(name: str) -> str:
    """``name`` as one file name: characters other than letters, digits, ``._-`` become
    ``_`` and a short hash of the original keeps distinct names distinct (a group
    named ``../x`` never writes outside its directory)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200]
    if safe != name or safe in (".", ".."):
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        safe = f"{safe}-{digest}"
    return safe


def check_writable_target(path: Path | str, what: str = "file") -> Path:
    """The path to replace (symlinks followed), or InvalidInputError when the
    target exists and is not a regular file. Also usable before a long operation
    to refuse a bad ``--file`` before any work is done."""
    if str(path) == "":
        raise InvalidInputError(f"{what} path is empty")
    p = Path(path)
    target = p
    if p.is_symlink():
        target = Path(os.path.realpath(p))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target
    except NotADirectoryError as e:
        raise InvalidInputError(f"cannot write {what} {p}: a parent is not a directory") from e
    except OSError as e:
        raise WriteFailedError(f"cannot write {what} {p}: {e.strerror or e}") from e
    if stat.S_ISDIR(st.st_mode):
        raise InvalidInputError(f"cannot write {what} {p}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInputError(
            f"refusing to write {what} {p}: it exists and is not a regular file "
            f"({_kind(st.st_mode)})")
    return target


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def write_file(path: Path | str, data: str | bytes, *, what: str = "file",
               mode: int | None = None, make_parents: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path written.

    ``mode``: permission bits of the file; None keeps an existing file's bits
    and gives a new file :data:`DEFAULT_MODE`.
    """
    target = check_writable_target(path, what)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    parent = target.parent
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            mode = DEFAULT_MODE
    tmp: str | None = None
    try:
        if make_parents:
            parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
        try:
            os.fchmod(fd, mode)
            view = memoryview(raw)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        # the target may have been swapped for a non-regular file meanwhile
        check_writable_target(target, what)
        os.replace(tmp, target)
        tmp = None
        _fsync_dir(parent)
    except OSError as e:
        raise WriteFailedError(
            f"cannot write {what} {path}: {e.strerror or e} (nothing was replaced)") from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return target


def _fsync_dir(parent: Path) -> None:
    try:
        dir_fd = os.open(parent, os.O_RDONLY)
    except OSError:
        return  # some file systems do not open directories; the rename is done
    try:
        with contextlib.suppress(OSError):  # EINVAL on file systems without it
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
