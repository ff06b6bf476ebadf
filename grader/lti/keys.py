"""The tool's own key pair: what it signs with (client assertions, deep-linking answers), and
the public half every platform reads at GET /lti/jwks.

The private key is made once, the first time the service starts with `--lti`, and kept in
OUT/lti/tool-key.pem, a file only its owner reads, in a folder only its owner enters (OUT is
the instructor's; a copy of the gradebook alone gives nobody the key). Its `kid` is the key's
RFC 7638 thumbprint, so a platform that caches the JWKS can tell a new key from the old one.
To replace it, stop the service and remove the file: the next start makes a new one, which the
platforms pick up from the JWKS URL.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from grader.errors import UsageError
from grader.inert import PATH_LIMIT, terminal

KEY_FILE = "tool-key.pem"
ALGORITHM = "RS256"


class ToolKey:
    """The private key, its kid, and its public JWK."""

    def __init__(self, private: rsa.RSAPrivateKey):
        self._private = private
        public = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
        self.kid = _thumbprint(public)
        self.jwk = {**public, "kid": self.kid, "alg": ALGORITHM, "use": "sig"}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.jwk]}

    def sign(self, claims: dict[str, Any], *, lifetime_s: int = 300) -> str:
        """`claims` as a JWT signed with the tool's key, with iat, exp and a fresh jti."""
        issued = int(time.time())
        body = {"iat": issued, "exp": issued + lifetime_s, "jti": uuid.uuid4().hex, **claims}
        return jwt.encode(body, self._private, algorithm=ALGORITHM, headers={"kid": self.kid})


def _thumbprint(public: dict[str, Any]) -> str:
    """RFC 7638: the SHA-256 of the key's required members, in order, base64url."""
    import base64
    import hashlib
    import json

    members = json.dumps({k: public[k] for k in ("e", "kty", "n")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(members.encode()).digest()).rstrip(b"=").decode()


def tool_key(out_dir: Path) -> ToolKey:
    """OUT's key pair, made (0600, in a 0700 folder) the first time."""
    folder = out_dir / "lti"
    path = folder / KEY_FILE
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            return ToolKey(_load(path))
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
            out.flush()
            os.fsync(out.fileno())
        return ToolKey(private)
    except OSError as exc:
        raise UsageError(f"cannot keep the LTI tool's key in {terminal(path, PATH_LIMIT)} "
                         f"({exc.strerror or exc})") from None


def _load(path: Path) -> rsa.RSAPrivateKey:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as kept:
        if os.fstat(kept.fileno()).st_mode & 0o077:
            raise UsageError(f"the LTI tool's key {terminal(path, PATH_LIMIT)} is readable by others: "
                             f"chmod 600 it (or remove it to make a new one)")
        data = kept.read(64 * 1024)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise UsageError(f"{terminal(path, PATH_LIMIT)} is not an RSA private key in PEM: remove it, and the "
                         "service makes a new one")
    return key
