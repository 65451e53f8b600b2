"""Provenance (DESIGN §12 "Trust the user, not the repository"): proof that an artifact the server acts on later —
a proposal, a split index — was written by this server for this user, not brought by a clone.

The proof is an HMAC-SHA256 with a per-user secret that lives outside every repository: `~/.nagent/secret`, 32
random bytes as hex, mode 0600 in the user's own folder. A repository can commit any file it likes, but it cannot
know this secret, so it cannot make a MAC this user's server accepts. Each kind of artifact has its own domain
(`mac("proposal", …)` never verifies as a `"split-index"`), so one artifact cannot be passed off as another.

The secret is created on first use, whole and at once (written to a private temporary file, then linked into place:
two servers starting together agree on one secret). A secret file that is not a regular file owned by the user with
mode 0600 is never used nor replaced: `ProvenanceError` says what is wrong, and every artifact is then treated as
foreign (nothing is applied on a proof that anyone could have read or planted).

What this does not stop: a command the model runs with `shell: allow` runs as the user and can read the secret
(it can also write any file the user can); the secret keeps out what a clone or an archive brings.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import threading
from pathlib import Path

from nagent_lsp.config.state_root import SECRET_FILE, secret_path
from nagent_lsp.core.errors import UserError

SECRET_BYTES = 32
_cache: dict[str, bytes] = {}  # secret path -> key, read once per process (HOME differs between tests)
_lock = threading.Lock()


class ProvenanceError(UserError):
    """The per-user secret cannot be used (wrong owner, mode or kind, unreadable): nothing can be proven."""


def user_secret() -> bytes:
    """This user's key, created on first use; ProvenanceError when the file exists but may not be trusted."""
    path = secret_path()
    key = str(path)
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            cached = _cache[key] = _read_or_create(path)
        return cached


def _read_or_create(path: Path) -> bytes:
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    _create(path)
    return _read(path)


def _read(path: Path) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ProvenanceError(f"the per-user secret {path} cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProvenanceError(f"the per-user secret {path} is not a regular file; it is not used")
        if st.st_uid != os.getuid():
            raise ProvenanceError(f"the per-user secret {path} is owned by uid {st.st_uid}, not by you; it is not used")
        if stat.S_IMODE(st.st_mode) != 0o600:
            raise ProvenanceError(
                f"the per-user secret {path} has mode {stat.S_IMODE(st.st_mode):04o}, not 0600; it is not used "
                f"(chmod 600 it if you made it, else delete it and a new one is made)"
            )
        raw = os.read(fd, 4 * SECRET_BYTES + 2)
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != SECRET_BYTES:
        raise ProvenanceError(f"the per-user secret {path} is not {SECRET_BYTES} bytes of hex; it is not used")
    return key


def _create(path: Path) -> None:
    """Write a fresh secret to a private temporary file, then link it into place (O_EXCL semantics: an existing
    secret, made meanwhile by another server, wins and is used)."""
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ProvenanceError(f"the per-user secret cannot be created in {folder} ({exc.strerror or exc})") from None
    temporary = folder / f".{SECRET_FILE}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, (secrets.token_hex(SECRET_BYTES) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made one first: theirs is the secret
    except OSError as exc:
        raise ProvenanceError(f"the per-user secret {path} cannot be created ({exc.strerror or exc})") from None
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def mac(kind: str, payload: bytes) -> str:
    """HMAC-SHA256 (hex) of `payload` in the domain `kind` ("proposal", "split-index", …) with this user's secret.
    ProvenanceError when the secret cannot be used."""
    return hmac.new(user_secret(), kind.encode("utf-8") + b"\0" + payload, hashlib.sha256).hexdigest()


def verify(kind: str, payload: bytes, claimed: object) -> bool:
    """Whether `claimed` is this user's MAC of `payload` in `kind` (constant-time). ProvenanceError when the secret
    cannot be used (the caller then treats the artifact as foreign, saying why)."""
    if not isinstance(claimed, str) or len(claimed) != 64:
        return False
    return hmac.compare_digest(mac(kind, payload), claimed)
