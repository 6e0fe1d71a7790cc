"""Vendor errors translated into opskit's error tree, the one place, and the APIs a
broker was seen not to serve.

When a request to an advertised API times out but the broker still answers
ApiVersions, the API is reported as unsupported by that broker rather than the
cluster as unreachable. An API is *remembered* as not served (later calls refused
at once, another path taken: see :meth:`ErrorTranslation.observe_not_served`) only
on evidence that is not a timeout: the broker closed the connection on it while
still answering ApiVersions."""

from __future__ import annotations

import logging
import threading
import time

from opskit.adapters.kafka import capabilities as caps_mod
from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.broker_quirks import BrokerQuirks
from opskit.adapters.kafka.capabilities import Capabilities
from opskit.core.connection import ConnectionConfig
from opskit.errors import (
    AuthenticationError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotAuthorisedError,
    NotFoundError,
    OpskitError,
    UnsupportedError,
)

log = logging.getLogger("opskit.adapters.kafka.admin.client")

_UNREACHABLE = {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE", "_WAIT_COORD",
                "REQUEST_TIMED_OUT", "_TIMED_OUT_QUEUE", "COORDINATOR_NOT_AVAILABLE",
                "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "_DESTROY"}
#: the request got no answer at all (as opposed to a coordinator that is busy)
_NO_ANSWER = {"_TRANSPORT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_TIMED_OUT_QUEUE"}
#: the connection failed under the request (closed by the broker, when it still answers
#: ApiVersions on a fresh one), as opposed to a request that was never answered
_CLOSED = {"_TRANSPORT"}
#: the broker answered, but with bytes librdkafka could not decode
UNPARSEABLE = {"_BAD_MSG", "_UNDERFLOW"}
_UNSUPPORTED = {"UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE", "INVALID_REQUEST"}
_AUTH = {"SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "_SSL"}
#: the principal lacks an ACL (NotAuthorisedError: optional reads degrade on it)
_AUTHZ = {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}
#: APIs remembered as not served once a broker closed or ignored them while still answering
#: ApiVersions (see :mod:`opskit.adapters.kafka.broker_quirks`): those with another path or that
#: are optional. The reads every command needs are never written off for a run.
_REMEMBERED_APIS = frozenset({"DescribeGroups", "ListGroups", "DescribeConfigs"})


def error_name(exc: BaseException) -> str:
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def parse_failure(exc: BaseException) -> bool:
    """librdkafka could not decode the broker's answer (it reports some such failures
    under other codes, with this text)."""
    text = error_text(exc).lower()
    return "failed to parse" in text or "parse failure" in text or "read underflow" in text


def error_text(exc: BaseException) -> str:
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        e = exc.args[0]
        return f"{e.name()}: {e.str()}"
    return str(exc) or type(exc).__name__


class ErrorTranslation:
    """What a failed request means (:meth:`translate`), and what the broker was seen
    not to serve. The state is set by :class:`~opskit.adapters.kafka.admin.session.AdminSession`."""

    conn: ConnectionConfig
    timeout: float
    quirks: BrokerQuirks
    confirmations: int
    _lock: threading.Lock
    _round: int
    _suspects: dict[str, tuple[int, int, str]]
    _answers_memo: tuple[float, bool] | None
    _last_error: str | None
    _auth_error: str | None
    _client: ck.AdminClient | None
    _caps: Capabilities | None

    # ----- APIs seen not served -----
    def new_round(self) -> None:
        """Start a new round of observations (the exporter: each cycle)."""
        self._round += 1

    def observe_not_served(self, operation: str, detail: str) -> bool:
        """The broker, still answering ApiVersions, closed the connection on (or answered
        unparseably) the request of ``operation``: evidence that it does not serve the
        API. Remembered in :attr:`quirks` (True) once seen in :attr:`confirmations`
        rounds without a success between; only APIs with another path or that are
        optional. Never call it for a timeout: a slow broker is not one without the API."""
        api = caps_mod.OPERATION_APIS[operation][-1][0]
        if api not in _REMEMBERED_APIS:
            return False
        with self._lock:
            seen, last, _ = self._suspects.get(api, (0, -1, ""))
            seen = seen + 1 if last != self._round else max(seen, 1)
            if seen < self.confirmations:
                self._suspects[api] = (seen, self._round, detail)
                if seen == 1 and last != self._round:
                    log.info("broker %s: %s failed (%s); remembered as not served only if "
                             "seen again", self._where(), api, detail)
                return False
            self._suspects.pop(api, None)
        self.quirks.note_dead_api(api, self._where(), detail)
        return True

    def served(self, operation: str) -> None:
        """The API of ``operation`` answered: what was seen before is forgotten."""
        api = caps_mod.OPERATION_APIS[operation][-1][0]
        if self._suspects:
            with self._lock:
                self._suspects.pop(api, None)

    def note_silent(self, api: str, where: str, detail: str) -> bool:
        """An advertised API gave no answer while the broker still answers ApiVersions:
        remembered for this run (True) only for DescribeConfigs (no other path) and
        only in a short-lived admin (a command); a timeout is no evidence for the
        exporter, which asks again next time."""
        if api != "DescribeConfigs" or self.confirmations > 1:
            return False
        self.quirks.note_dead_api(api, where, detail)
        return True

    def _on_error(self, err: ck.KafkaError) -> None:
        with self._lock:
            self._last_error = f"{err.name()}: {err.str()}"
            if err.name() in _AUTH:
                self._auth_error = self._last_error

    # ----- error translation: the one place -----
    def translate(self, exc: BaseException, what: str, operation: str | None = None) -> OpskitError:
        if isinstance(exc, OpskitError):
            return exc
        name = error_name(exc)
        if name in _AUTH or (self._auth_error and (isinstance(exc, TimeoutError) or name in _UNREACHABLE)):
            # librdkafka fails the request as a transport error; error_cb had the cause
            return AuthenticationError(f"authentication or TLS failure at {self.conn.bootstrap} "
                                       f"({what}): {self._auth_error or error_text(exc)}")
        if name in UNPARSEABLE or parse_failure(exc):
            return UnsupportedError(
                f"the broker at {self._where()} answered something opskit cannot parse "
                f"{self._to(operation)}({what}): {error_text(exc)}")
        if isinstance(exc, TimeoutError) or name in _UNREACHABLE:
            detail = self._last_error or error_text(exc)
            if name in ("_TRANSPORT", "_TIMED_OUT") and (
                    why := caps_mod.not_kafka(self.conn, min(self.timeout, 1.0))):
                return KafkaUnavailableError(why)
            if ((isinstance(exc, TimeoutError) or name in _NO_ANSWER)
                    and self._broker_still_answers()):
                # something answered: the broker is up, this request is what fails on it
                remembered = operation is not None and self._remember_not_served(
                    operation, name in _CLOSED)
                if name in _CLOSED:
                    # librdkafka keeps the broken connection's broker "down" for a while
                    # (later requests fail with "no leaders found"): start afresh
                    self._client = None
                    return UnsupportedError(
                        f"the broker at {self._where()} closed the connection on "
                        f"{self._apis(operation) or 'the request'} ({what}) and still answers "
                        "ApiVersions: it does not handle that request; " + (
                            "treating it as unsupported by this broker"
                            if remembered or self.confirmations == 1 else
                            "asked again next time before it is taken for unsupported"))
                return UnsupportedError(
                    f"the broker at {self._where()} answers ApiVersions but not "
                    f"{self._apis(operation) or 'this request'}, needed for {what} (no usable "
                    f"answer within {self.timeout:g}s: {detail}); " + (
                        "treating it as unsupported by this broker" if remembered else
                        "a broker that ignores it, or one too slow to answer in time")
                )
            return KafkaUnavailableError(
                f"cannot reach Kafka at {self.conn.bootstrap} ({what}, timeout {self.timeout:g}s): {detail}"
            )
        if name in _UNSUPPORTED:
            return UnsupportedError(f"the broker does not support {what} ({error_text(exc)})")
        if name in _AUTHZ:
            return NotAuthorisedError(f"not authorised for {what} ({self.conn.principal} has no "
                                      f"ACL for it): {error_text(exc)}")
        if name in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
            return NotFoundError(f"{what}: topic or partition does not exist")
        if name == "GROUP_ID_NOT_FOUND":
            return NotFoundError(f"{what}: consumer group does not exist")
        return KafkaOperationError(f"{what} failed: {error_text(exc)}")

    def _where(self) -> str:
        """The broker that answered the capability probe (else the bootstrap)."""
        caps = self._caps
        return (caps.broker if caps is not None else None) or self.conn.bootstrap

    @staticmethod
    def _apis(operation: str | None) -> str:
        if operation is None:
            return ""
        return " / ".join(n for n, _v in caps_mod.OPERATION_APIS[operation])

    def _to(self, operation: str | None) -> str:
        apis = self._apis(operation)
        return f"to {apis} " if apis else ""

    def _remember_not_served(self, operation: str, closed: bool) -> bool:
        """The broker, still answering ApiVersions, closed or ignored the request of
        ``operation``: evidence when closed (:meth:`observe_not_served`); a timeout only
        as :meth:`note_silent` allows. True when now remembered as not served."""
        if closed:
            return self.observe_not_served(
                operation, "it closed the connection while still answering ApiVersions")
        api = caps_mod.OPERATION_APIS[operation][-1][0]
        return self.note_silent(api, self._where(), f"no answer within {self.timeout:g}s while "
                                "still answering ApiVersions")

    def _broker_still_answers(self) -> bool:
        """After a failed request: does the broker answer a fresh ApiVersions (so it is
        up)? Asked once per batch of failures (the answer is kept for 5 s: a ListOffsets
        over many partitions fails once per partition)."""
        now = time.monotonic()
        if self._answers_memo is not None and now - self._answers_memo[0] < 5.0:
            return self._answers_memo[1]
        answers = caps_mod.answers_api_versions(self.conn, timeout=min(self.timeout, 3.0))
        self._answers_memo = (time.monotonic(), answers)
        return answers
