"""Opening a connection to one broker as a connection config says: TCP, TLS, SASL.

Used by the capability probe and by the batched client, so both speak every
security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) the same way, and
both report a mistake the same way: a definite authentication or TLS failure
raises :class:`~opskit.errors.AuthenticationError` with the cause in one line,
at the first failed attempt (no retries, so at most one failed login):

* wrong password or unknown user, a SASL mechanism the listener does not enable,
  SASL spoken to a listener without SASL (see :mod:`opskit.adapters.kafka.protocol.sasl`);
* a broker certificate that does not verify, and why (unknown CA, wrong host);
* TLS spoken to a plaintext port (checked: the port answers a plain ApiVersions)
  and plaintext spoken to a TLS port (checked: the port completes a TLS handshake).

Anything else (refused, unreachable, silent, dropped) is left as the ``OSError``
or ``ValueError`` it is, for the caller's usual "unreachable" or "unsupported"
handling.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import TYPE_CHECKING, Any

from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol import sasl
from opskit.core.connection import ConnectionConfig
from opskit.errors import AuthenticationError

if TYPE_CHECKING:
    import ssl

_MAX_FRAME = 1 << 20  # answers of the login exchange and ApiVersions are small


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a bootstrap list, in order; entries that are not
    host:port are left out (an IPv6 host loses its brackets)."""
    out: list[tuple[str, int]] = []
    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def tls_context(conn: ConnectionConfig) -> ssl.SSLContext:
    """The TLS context for a connection's CA and client certificate (SSL, SASL_SSL)."""
    import ssl  # only with TLS (about 6 ms of start-up otherwise)

    try:
        ctx = ssl.create_default_context(cafile=conn.ca_file) if conn.ca_file else \
            ssl.create_default_context()
        if conn.cert_file and conn.key_file:
            ctx.load_cert_chain(conn.cert_file, conn.key_file)
        ctx.check_hostname = conn.verify_hostname
    except (OSError, ssl.SSLError) as e:  # a missing or unreadable CA / certificate file
        what = ", ".join(f for f in (conn.ca_file, conn.cert_file) if f) or "system CAs"
        raise AuthenticationError(f"cannot load the TLS files ({what}): "
                                  f"{getattr(e, 'strerror', None) or e}") from e
    return ctx


def uses_tls(conn: ConnectionConfig) -> bool:
    return conn.security_protocol.upper() in ("SSL", "SASL_SSL")


def uses_sasl(conn: ConnectionConfig) -> bool:
    return conn.security_protocol.upper().startswith("SASL")


def recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete answer in time")
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def send(sock: socket.socket, req: kp.Request, deadline: float, client_id: str,
         correlation_id: int) -> None:
    sock.settimeout(max(deadline - time.monotonic(), 0.05))
    sock.sendall(kp.encode_request(req, correlation_id, client_id))


def receive(sock: socket.socket, req: kp.Request, deadline: float, correlation_id: int) -> Any:
    """The decoded answer to ``req``, the next answer on ``sock``."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4, deadline))
    if not 4 <= size <= _MAX_FRAME:
        raise ValueError(f"implausible answer size {size}")
    got, answer = kp.decode_response(req, recv_exact(sock, size, deadline))
    if got != correlation_id:
        raise ValueError(f"answer with correlation id {got}, expected {correlation_id}")
    return answer


def roundtrip(sock: socket.socket, req: kp.Request, deadline: float, client_id: str,
              correlation_id: int = 1) -> Any:
    """One request and its decoded answer on ``sock`` (nothing else in flight)."""
    send(sock, req, deadline, client_id, correlation_id)
    return receive(sock, req, deadline, correlation_id)


def plain_request_refused(sock: socket.socket, req: kp.Request, deadline: float,
                          correlation_id: int, host: str, port: int,
                          conn: ConnectionConfig) -> None:
    """Read the answer to an ordinary request sent (after ApiVersions) on a connection
    without SASL. A listener that requires SASL drops the connection instead of
    answering; when it does and the port then takes a SaslHandshake, raise
    AuthenticationError naming the mechanisms. (A listener that merely offers SASL,
    as Tansu's does, answers the request: fine.)"""
    try:
        receive(sock, req, deadline, correlation_id)
        return
    except (ConnectionError, ValueError, struct.error):
        pass
    enabled = _sasl_mechanisms(host, port, conn, deadline)
    if enabled:
        raise AuthenticationError(
            f"the listener at {host}:{port} requires SASL (it enables: {', '.join(enabled)}) but "
            f"the connection is configured for {conn.security_protocol.upper()}: use "
            "SASL_PLAINTEXT or SASL_SSL with a mechanism, username and password")


def _sasl_mechanisms(host: str, port: int, conn: ConnectionConfig, deadline: float) -> list[str]:
    """The mechanisms ``host:port`` offers to a SaslHandshake (diagnosis only; empty when
    it refuses SASL or does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=_left(deadline)) as raw:
            sock = _tls_handshake(raw, host, port, conn, deadline) if uses_tls(conn) else raw
            err, enabled = roundtrip(sock, kp.sasl_handshake("PLAIN"), _diag_deadline(deadline),
                                     conn.client_id)
    except (OSError, ValueError, struct.error, AuthenticationError):
        return []
    return list(enabled) if err in (0, 33) else []


def open_connection(host: str, port: int, conn: ConnectionConfig, deadline: float) -> socket.socket:
    """A connected socket to ``host:port``, TLS set up and SASL logged in as ``conn``
    says. Raises AuthenticationError (definite mistakes), OSError or ValueError."""
    where = f"{host}:{port}"
    raw = socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.05))
    sock: socket.socket = raw
    try:
        if uses_tls(conn):
            sock = _tls_handshake(raw, host, port, conn, deadline)
        if uses_sasl(conn):
            try:
                sasl.authenticate(lambda r: roundtrip(sock, r, deadline, conn.client_id, 0x5A51),
                                  conn, where)
            except (ConnectionError, ValueError, struct.error) as e:
                raise plaintext_mismatch(host, port, conn, deadline, e) from e
        return sock
    except BaseException:
        sock.close()
        raise


def plaintext_mismatch(host: str, port: int, conn: ConnectionConfig, deadline: float,
                       err: BaseException) -> BaseException:
    """After the first exchange on a connection without TLS failed (closed, or an
    answer that is no Kafka frame): an AuthenticationError when the port speaks TLS,
    else ``err`` unchanged."""
    if uses_tls(conn) or not _speaks_tls(host, port, deadline):
        return err
    return AuthenticationError(
        f"{host}:{port} speaks TLS but the connection is configured for "
        f"{conn.security_protocol.upper()}: use security protocol SSL or SASL_SSL")


def _tls_handshake(raw: socket.socket, host: str, port: int, conn: ConnectionConfig,
                   deadline: float) -> socket.socket:
    import ssl

    ctx = tls_context(conn)
    raw.settimeout(max(deadline - time.monotonic(), 0.05))
    try:
        return ctx.wrap_socket(raw, server_hostname=host)
    except ssl.SSLCertVerificationError as e:
        ca = f"CA file {conn.ca_file}" if conn.ca_file else "the system's CAs (no CA file configured)"
        raise AuthenticationError(
            f"TLS certificate verify failed for {host}:{port}: {e.verify_message} "
            f"(checked against {ca})") from e
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        if _speaks_plaintext(host, port, conn, deadline):
            raise AuthenticationError(
                f"{host}:{port} does not speak TLS (it answers plaintext Kafka requests) but the "
                f"connection is configured for {conn.security_protocol.upper()}: use security "
                "protocol PLAINTEXT or SASL_PLAINTEXT, or the port of a TLS listener") from e
        reason = getattr(e, "reason", None) or str(e) or type(e).__name__
        raise AuthenticationError(f"TLS handshake with {host}:{port} failed: {reason}") from e


def _speaks_plaintext(host: str, port: int, conn: ConnectionConfig, deadline: float) -> bool:
    """Does ``host:port`` answer a plain ApiVersions? (diagnosis only)"""
    try:
        with socket.create_connection((host, port), timeout=_left(deadline)) as s:
            roundtrip(s, kp.api_versions(), _diag_deadline(deadline), conn.client_id)
            return True
    except (OSError, ValueError, struct.error):
        return False


def _speaks_tls(host: str, port: int, deadline: float) -> bool:
    """Does ``host:port`` complete a TLS handshake? (diagnosis only: nothing is sent
    over it and the certificate is not trusted for anything)"""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=_left(deadline)) as s, \
                ctx.wrap_socket(s, server_hostname=host):
            return True
    except (OSError, ValueError):
        return False


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.5)


def _diag_deadline(deadline: float) -> float:
    return time.monotonic() + _left(deadline)
