"""A ledger's file: locked, checksummed, replaced atomically.

The file is one JSON document ``{"ledger": <body>, "sha256": <hex digest of
the body's canonical JSON>}``. A write goes to a temporary file in the same
folder, is flushed and ``fsync``-ed, then renamed over the ledger (atomic on
POSIX and Windows) and the folder is synced: a reader sees the old ledger or
the new one, never a mix, whatever kills the writer. Read-modify-write
cycles hold an exclusive lock on ``<file>.lock`` (``fcntl.flock``; on
Windows ``msvcrt.locking``), so two processes never both act on the same
state.
"""

import contextlib
import hashlib
import json
import os
import tempfile

FORMAT = "skdp-privacy-ledger"
VERSION = 1


class LedgerError(ValueError):
    """A ledger file is missing, damaged, of another format or version, or
    inconsistent; never read as a fresh budget."""


def _canonical(body):
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


def checksum(body):
    """SHA-256 hex digest of ``body``'s canonical JSON."""
    return hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()


def read_body(path):
    """The checked body of the ledger at ``path``; a :class:`LedgerError`
    when it is missing or damaged."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise LedgerError(
            f"no privacy ledger at {os.fspath(path)!r}. A missing ledger is never read as a "
            "fresh budget: restore the file, or create a new ledger with "
            "PrivacyLedger.create(path, max_epsilon=..., delta=...) only if no budget of "
            "this data set was ever spent."
        ) from None
    try:
        document = json.loads(raw.decode("utf-8"))
        body, digest = document["ledger"], document["sha256"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise LedgerError(
            f"the privacy ledger {os.fspath(path)!r} is damaged (not a ledger document); "
            "restore it from a backup -- it is not read as a fresh budget."
        ) from None
    if not isinstance(body, dict) or checksum(body) != digest:
        raise LedgerError(
            f"the privacy ledger {os.fspath(path)!r} is damaged: its checksum does not "
            "match its contents (edited by hand, or corrupted). Restore it from a backup; "
            "it is not read as a fresh budget."
        )
    if body.get("format") != FORMAT:
        raise LedgerError(f"{os.fspath(path)!r} is not a {FORMAT} file.")
    if body.get("version") != VERSION:
        raise LedgerError(
            f"the privacy ledger {os.fspath(path)!r} has format version "
            f"{body.get('version')!r}; this skdp reads version {VERSION}."
        )
    return body


def write_body(path, body):
    """Replace the ledger at ``path`` by ``body``, atomically and durably."""
    path = os.fspath(path)
    document = _canonical({"ledger": body, "sha256": checksum(body)})
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ledger-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(document)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(folder)


def _sync_folder(folder):
    """Make the rename durable (POSIX; a no-op where folders cannot be opened)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path):
    """Hold the exclusive lock of the ledger at ``path`` (blocking)."""
    lock_path = os.fspath(path) + ".lock"
    with open(lock_path, "a+b") as handle:
        _lock(handle)
        try:
            yield
        finally:
            _unlock(handle)


def _lock(handle):
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        handle.seek(0)
        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gives up after 10 s: keep waiting
                continue
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _unlock(handle):
    try:
        import fcntl
    except ImportError:
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
