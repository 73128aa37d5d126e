"""The server secret that keys every token digest kept at rest (HMAC-SHA256).

Why: an unsalted digest of a guessable token in the database lets anyone who can
read the database test guesses offline. A digest keyed with a secret that is not
in the database does not (docs/operator.md "Where state lives").

Where the secret comes from, first match:
1. env `TIERGATE_SECRET_KEY` (a fleet sets the same value on every instance);
2. env `TIERGATE_SECRET_KEY_FILE`, a file holding it;
3. a SQLite database: the file `<database file>.secret` beside it, so every
   instance sharing that database shares the key;
4. otherwise `$XDG_STATE_HOME/tiergate/secret.key` (default ~/.local/state).
A missing file is created once, mode 0600, atomically (two instances starting at
once agree on one key). Without a database nothing is at rest: a random key for
this process only.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CHECK_LABEL = b"tiergate:secret-check:v1"


@dataclass(frozen=True, slots=True)
class ServerSecret:
    key: bytes
    source: str  # where it came from, for messages (never the key)

    def digest(self, data: bytes) -> bytes:
        return hmac.new(self.key, data, hashlib.sha256).digest()

    def hexdigest(self, data: bytes) -> str:
        return self.digest(data).hex()

    def check_value(self) -> str:
        """Stored in the database by the first instance: a later instance with a
        different secret is told so at start-up instead of failing every token."""
        return self.hexdigest(CHECK_LABEL)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and :memory:)."""
    for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
        if url.startswith(prefix):
            path = url[len(prefix) :].split("?", 1)[0]
            return None if path in ("", ":memory:") else Path(path)
    return None


def default_key_file(env: Mapping[str, str], database_url: str) -> Path:
    db_file = sqlite_path(database_url)
    if db_file is not None:
        return db_file.with_name(db_file.name + ".secret")
    state_home = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "tiergate" / "secret.key"


def resolve_secret(env: Mapping[str, str], database_url: str) -> ServerSecret:
    """This instance's secret (see the module docstring for the order)."""
    value = env.get("TIERGATE_SECRET_KEY")
    if value:
        return ServerSecret(value.encode(), "TIERGATE_SECRET_KEY")
    if env.get("TIERGATE_SECRET_KEY_FILE"):
        path = Path(env["TIERGATE_SECRET_KEY_FILE"])
        return ServerSecret(path.read_bytes().strip(), str(path))
    if not database_url:
        return ServerSecret(secrets.token_bytes(32), "this process (no database)")
    path = default_key_file(env, database_url)
    return ServerSecret(read_or_create(path), str(path))


def read_or_create(path: Path) -> bytes:
    """The key in `path`, created (0600, atomically) when the file is missing."""
    with contextlib.suppress(FileNotFoundError):
        return path.read_bytes().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_urlsafe(32).encode())
        with contextlib.suppress(FileExistsError):  # another instance won: use its key
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_bytes().strip()
