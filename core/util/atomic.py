"""The one place where onnxport puts files in place: temp beside the destination, fsync, rename.

Why one module: every writer must leave the old file or the complete new one, never a partial
file or a stray temp, whatever happens (error, cancel, SIGTERM, SIGKILL, two runs on one path).

Contract:
- `AtomicWrite(dest)` (a context manager) is one write to `dest`, a file or a folder. `new_file()`
  / `new_dir()` make temps in dest's folder named `.<dest name>.<pid>.<random>.onnxport-tmp`;
  `companion(suffix)` names a file unique to this run (`<dest name>.<run id>.<suffix>`).
- `commit(moves, obsolete=...)` is the commit point: under a folder lock it fsyncs every temp,
  renames the companions, then the destination last, then deletes the `obsolete()` files.
- Leaving the `with` block removes whatever was not committed; entering it removes the temps of
  dead owners (`remove_stale_temps`: SIGKILL cannot be caught); `remove_live_temps()` lets a front
  end remove the temps of writes running in other threads.
The core installs no signal handler: front ends turn SIGINT/SIGTERM into a cancel of the job's token."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from onnxport.core.util.errors import cannot_write
from onnxport.core.util.file_names import companion_prefix, kept
from onnxport.core.util.out_paths import check_kind

TEMP_SUFFIX = ".onnxport-tmp"
_NAME_KEEP = 180  # bytes of the destination name kept in a temp name (file names are <= 255 bytes)
LEGACY_AGE = 24 * 3600  # temps of older onnxport versions (no pid in the name) go after a day

_registry_lock = threading.Lock()
_live: dict[Path, int] = {}  # temp path -> owner pid (a fork inherits entries it does not own)


def folder_of(dest: Path) -> Path:
    return dest.parent if str(dest.parent) else Path(".")


def run_id() -> str:
    """8 hex digits naming one write (its temps and companion files)."""
    return secrets.token_hex(4)


def _temp_re(name: str) -> re.Pattern[str]:
    return re.compile(r"\." + re.escape(kept(name, _NAME_KEEP)) + r"\.(\d+)\.[0-9a-f]{8}" + re.escape(TEMP_SUFFIX))


def _legacy_re(name: str) -> re.Pattern[str]:
    """Temps of onnxport before this module: mkstemp/mkdtemp names without an owner pid."""
    return re.compile(r"\." + re.escape(name) + r"(\.data)?\.[A-Za-z0-9_]{8}\.(tmp|onnxport)")


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except OSError:
        pass


def remove_stale_temps(folder: str | Path, name: str) -> list[Path]:
    """Delete the temps of destination `name` in `folder` whose owner process is gone (a run that
    was killed); temps of live processes, this one included, are left alone. Also deletes temps of
    older onnxport versions (no pid in their name) once they are a day old. Returns what went."""
    folder = Path(folder)
    current, legacy = _temp_re(name), _legacy_re(name)
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = current.fullmatch(entry.name)
        if match is not None:
            stale = not _pid_alive(int(match.group(1)))
        elif legacy.fullmatch(entry.name):
            try:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > LEGACY_AGE
            except OSError:
                stale = False
        else:
            continue
        if stale:
            _remove(Path(entry.path))
            removed.append(Path(entry.path))
    return removed


def live_temps() -> list[Path]:
    """The temps this process is writing right now."""
    with _registry_lock:
        return [p for p, pid in _live.items() if pid == os.getpid()]


def remove_live_temps() -> list[Path]:
    """Delete every temp this process is writing (for a front end that is terminating)."""
    with _registry_lock:
        mine = [p for p, pid in _live.items() if pid == os.getpid()]
        for p in mine:
            del _live[p]
    for p in mine:
        _remove(p)
    return mine


def _register(path: Path) -> None:
    with _registry_lock:
        _live[path] = os.getpid()


def _unregister(path: Path) -> None:
    with _registry_lock:
        _live.pop(path, None)


def fsync_path(path: Path) -> None:
    """fsync a file, or a folder and every file in it (a staged tree before its rename)."""
    if path.is_dir() and not path.is_symlink():
        for root, _dirs, files in os.walk(path):
            for f in files:
                fsync_path(Path(root) / f)
            fsync_dir(Path(root))
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (best effort: some file systems refuse a folder fsync)."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` (flock on the folder itself: no lock file left behind) so two
    commits into one folder never interleave. Best effort where flock is missing or refused."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; renames still happen in order
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


def _is_inode(path: Path, inode: int | None) -> bool:
    """Whether `path` is the file `inode` (the final rename happened, an exception came after it)."""
    try:
        return inode is not None and os.stat(path).st_ino == inode
    except OSError:
        return False


class AtomicWrite:
    """One write to `dest` through temps and a rename; see the module docstring."""

    def __init__(self, dest: str | Path) -> None:
        self.dest = Path(dest)
        self.folder = folder_of(self.dest)
        self.run = run_id()
        self._temps: list[Path] = []
        self.committed = False

    def start(self) -> AtomicWrite:
        """Begin the write: refuse a dest that is a device, a pipe... (`out_paths.check_kind`: a
        rename would replace the node itself), remove the stale temps of dest (what entering the
        `with` does)."""
        check_kind(self.dest, folder_ok=True)
        remove_stale_temps(self.folder, self.dest.name)
        return self

    def __enter__(self) -> AtomicWrite:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.discard()

    def _temp_path(self) -> Path:
        name = kept(self.dest.name, _NAME_KEEP)
        return self.folder / f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"

    def new_file(self) -> tuple[int, Path]:
        """A new empty temp file (mode 0600 until commit) and its fd open for writing."""
        for _ in range(16):
            path = self._temp_path()
            self._track(path)  # before it exists: a signal right after the create still finds it
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            except FileExistsError:  # not ours: forget the name, never remove that file
                self._untrack(path)
                continue
            except OSError as exc:
                self._untrack(path)
                raise cannot_write(self.dest, exc) from None
            return fd, path
        raise cannot_write(self.dest, "no free temp file name")

    def new_dir(self) -> Path:
        """A new empty temp folder (tools that write files by path work in it)."""
        for _ in range(16):
            path = self._temp_path()
            self._track(path)  # before it exists, as in new_file
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                self._untrack(path)
                continue
            except OSError as exc:
                self._untrack(path)
                raise cannot_write(self.dest, exc) from None
            return path
        raise cannot_write(self.dest, "no free temp folder name")

    def rename_inside(self, src: Path, dst: Path) -> None:
        """Rename a file inside one of this write's temp folders (e.g. a tool's `x.data` to the
        run's unique name); nothing outside the temps moves before `commit`."""
        if not any(t in src.parents and t in dst.parents for t in self._temps):
            raise ValueError(f"{src} -> {dst}: not inside this write's temp folders")
        os.replace(src, dst)

    def _track(self, path: Path) -> None:
        self._temps.append(path)
        _register(path)

    def _untrack(self, path: Path) -> None:
        self._temps.remove(path)
        _unregister(path)

    def companion(self, suffix: str = "data") -> Path:
        """`<dest name>.<run id>.<suffix>` beside dest: a name no other write uses (`companion_prefix`)."""
        return self.folder / f"{companion_prefix(self.dest.name)}.{self.run}.{suffix}"

    def commit(self, moves: Iterable[tuple[Path, Path]], *,
               obsolete: Callable[[], Iterable[Path]] | None = None) -> list[Path]:
        """Rename each temp (or a file inside a temp folder) onto its destination, the last one
        being the commit itself; see the module docstring. Returns the destinations."""
        moves = [(Path(src), Path(dst)) for src, dst in moves]
        for _, dst in moves:  # it may have become a pipe or a device since `start`
            check_kind(dst, folder_ok=True)
        folders = list(dict.fromkeys(folder_of(dst) for _, dst in moves))  # to fsync after renames
        placed: list[Path] = []
        done, inode = False, None
        try:
            with folder_lock(self.folder):
                for src, _ in moves:
                    fsync_path(src)
                    os.chmod(src, 0o755 if src.is_dir() else 0o644)
                old = [Path(p) for p in obsolete()] if obsolete is not None else []
                for src, dst in moves[:-1]:
                    existed = os.path.lexists(dst)
                    os.replace(src, dst)
                    if not existed:
                        placed.append(dst)
                if len(moves) > 1:
                    for folder in folders:
                        fsync_dir(folder)
                src, dst = moves[-1]
                inode = os.stat(src).st_ino
                os.replace(src, dst)
                done = self.committed = True
                fsync_dir(folder_of(dst))
                keep = {dst for _, dst in moves}
                for path in old:
                    if path not in keep:
                        _remove(path)
                for folder in dict.fromkeys(folder_of(p) for p in old):
                    fsync_dir(folder)
        except OSError as exc:
            raise cannot_write(self.dest, exc) from None
        finally:
            # an exception (a signal's) between the last rename and `done` must not undo it
            if not done and not _is_inode(moves[-1][1], inode):
                for path in placed:
                    _remove(path)
        for src, _ in moves:
            if src in self._temps:
                self._temps.remove(src)
                _unregister(src)
        return [dst for _, dst in moves]

    def discard(self) -> None:
        """Remove the temps not committed (idempotent)."""
        while self._temps:
            path = self._temps.pop()
            _remove(path)
            _unregister(path)


def is_temp_name(name: str) -> bool:
    """True for the name of a temp this module makes (for tests and tools listing a folder)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)
