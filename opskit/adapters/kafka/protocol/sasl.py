"""SASL logins for opskit's protocol-level client: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.

Kafka's flow (KIP-152): a SaslHandshake v1 request names the mechanism; the
broker answers with an error code and the mechanisms its listener enables; the
mechanism's tokens then travel in SaslAuthenticate requests, which are ordinary
Kafka requests with headers. PLAIN is one token (``authzid NUL user NUL
password``, RFC 4616). SCRAM (RFC 5802, with SHA-256 / SHA-512 as RFC 7677) is
two round trips: client-first / server-first, client-final (with the proof) /
server-final (with the server's signature, which is checked: a broker that does
not know the password cannot pass).

Written from the RFCs with ``hashlib`` and ``hmac``. Usernames are escaped as
RFC 5802 says (``=`` and ``,``); passwords are not SASLprep-normalised (neither
are Kafka's own clients'), so a non-ASCII password must be in the form the
broker stored.

Transport-agnostic: :func:`authenticate` takes a ``roundtrip`` that sends one
request and returns its decoded answer, so the capability probe and the batched
client share it. Failures raise :class:`~opskit.errors.AuthenticationError`
naming the user, the mechanism and the cause; no secret is ever put in a message.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any, Protocol

from opskit.adapters.kafka.protocol import codec as kp
from opskit.core.connection import ConnectionConfig
from opskit.errors import AuthenticationError

__all__ = ["MECHANISMS", "PlainLogin", "ScramLogin", "authenticate", "login_for"]

#: Kafka error codes of the SASL exchange
_UNSUPPORTED_SASL_MECHANISM, _ILLEGAL_SASL_STATE, _SASL_AUTHENTICATION_FAILED = 33, 34, 58
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *_HASHES)

Roundtrip = Callable[[kp.Request], Any]


class Login(Protocol):
    """One mechanism's client side: tokens out, the server's tokens in."""

    def first(self) -> bytes: ...

    def next(self, server: bytes) -> bytes | None:
        """The answer to the server's token, or None when the exchange is complete."""
        ...


class PlainLogin:
    """RFC 4616: one token, no answer expected."""

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._token

    def next(self, server: bytes) -> bytes | None:
        return None


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _fields(msg: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in msg.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


class ScramLogin:
    """RFC 5802 client (no channel binding: gs2 header ``n,,``)."""

    #: Kafka refuses fewer than 4096; more than this is not a broker's answer
    MAX_ITERATIONS = 1_000_000

    def __init__(self, username: str, password: str, hash_name: str,
                 nonce: str | None = None) -> None:
        self._hash = hash_name
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_escape(username)},r={self._nonce}"
        self._expected_server_signature: bytes | None = None
        self.verified = False

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash).digest()

    def next(self, server: bytes) -> bytes | None:
        text = server.decode("utf-8", errors="replace")
        f = _fields(text)
        if self._expected_server_signature is None:
            return self._client_final(text, f)
        if "e" in f:
            raise ValueError(f"server-final error: {f['e']}")
        got = base64.b64decode(f.get("v", ""), validate=False)
        if not hmac.compare_digest(got, self._expected_server_signature):
            raise ValueError("the broker's SCRAM signature does not match: it does not know "
                             "this password (or something is in between)")
        self.verified = True
        return None

    def _client_final(self, server_first: str, f: dict[str, str]) -> bytes:
        if "e" in f:
            raise ValueError(f"server-first error: {f['e']}")
        nonce, salt_b64, iterations = f.get("r", ""), f.get("s", ""), f.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ValueError("the broker's SCRAM nonce does not extend ours")
        if not iterations.isdigit() or not 0 < int(iterations) <= self.MAX_ITERATIONS:
            raise ValueError(f"implausible SCRAM iteration count {iterations!r}")
        salt = base64.b64decode(salt_b64)
        salted = _salted_password(self._hash, self._password, salt, int(iterations))
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._expected_server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@functools.lru_cache(maxsize=16)
def _salted_password(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802: 4096+ rounds of HMAC (5-10 ms in C). A command opens several
    connections, and the broker keeps one salt per user: computed once per process."""
    return hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


def login_for(conn: ConnectionConfig) -> Login:
    mechanism = (conn.sasl_mechanism or "").upper()
    user, password = conn.username or "", conn.password or ""
    if mechanism == "PLAIN":
        return PlainLogin(user, password)
    if mechanism in _HASHES:
        return ScramLogin(user, password, _HASHES[mechanism])
    raise AuthenticationError(f"SASL mechanism {conn.sasl_mechanism!r} is not one opskit speaks "
                              f"({', '.join(MECHANISMS)})")


def authenticate(roundtrip: Roundtrip, conn: ConnectionConfig, where: str) -> None:
    """Log in on a fresh connection to ``where`` (host:port) with ``conn``'s mechanism
    and credentials. Raises AuthenticationError with the cause in one line."""
    mechanism = (conn.sasl_mechanism or "").upper()
    login = login_for(conn)
    err, enabled = roundtrip(kp.sasl_handshake(mechanism))
    if err == _UNSUPPORTED_SASL_MECHANISM:
        raise AuthenticationError(
            f"SASL mechanism {mechanism} is not enabled on the listener at {where} "
            f"(it enables: {', '.join(enabled) or 'none'})")
    if err == _ILLEGAL_SASL_STATE:
        raise AuthenticationError(
            f"the listener at {where} does not use SASL (it refused the SASL handshake): "
            "use security protocol PLAINTEXT or SSL for it, or the port of a SASL listener")
    if err:
        raise AuthenticationError(f"SASL handshake with {where} failed (Kafka error code {err})")
    who = f"user {conn.username!r} with mechanism {mechanism} at {where}"
    token: bytes | None = login.first()
    while token is not None:
        answer: kp.SaslAnswer = roundtrip(kp.sasl_authenticate(1, token))
        if answer.error_code == _SASL_AUTHENTICATION_FAILED:
            said = f" (the broker says: {answer.error_message})" if answer.error_message else ""
            raise AuthenticationError(
                f"authentication failed for {who}: wrong password or unknown user{said}")
        if answer.error_code:
            raise AuthenticationError(f"authentication failed for {who}: Kafka error code "
                                      f"{answer.error_code} {answer.error_message or ''}".rstrip())
        try:
            token = login.next(answer.auth_bytes)
        except ValueError as e:
            raise AuthenticationError(f"authentication failed for {who}: {e}") from e
