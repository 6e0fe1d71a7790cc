"""The connection of a reassignment command: its two clients, its errors, its checks.

confluent-kafka (2.x) has no AlterPartitionReassignments, ListPartitionReassignments,
ElectLeaders or DescribeLogDirs, so those go through kafka-python's
``KafkaAdminClient`` (``alter_partition_reassignments``, ``list_partition_reassignments``,
``elect_leaders``, ``describe_log_dirs``). Metadata and configs go through
confluent-kafka (``describe_configs`` tells each value's source;
``incremental_alter_configs`` SETs and DELETEs single keys, never touching others).

Every vendor exception becomes an opskit error in :meth:`ReassignConnection.translate`.
Before anything, :meth:`ReassignConnection.require` checks the broker advertises the APIs
(ApiVersions); a broker without them (Tansu, gateways) gives UnsupportedError (exit 3)
naming the API. The calls themselves are :class:`opskit.adapters.reassign.admin.ReassignAdmin`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Self

from opskit.adapters.kafka import capabilities as caps_mod
from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.kafka_python import (
    close_kafka_python,
    kafka_python_config,
    quiet_kafka_python,
)
from opskit.core.connection import ConnectionConfig
from opskit.errors import (
    AuthenticationError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotAuthorisedError,
    OpskitError,
    UnsupportedError,
)

log = logging.getLogger(__name__)

#: (API, minimum version) an execution needs, checked against ApiVersions first
NEEDED_APIS: tuple[tuple[str, int], ...] = (
    ("ListPartitionReassignments", 0), ("AlterPartitionReassignments", 0),
    ("ElectLeaders", 0), ("IncrementalAlterConfigs", 0), ("DescribeConfigs", 0),
)
#: what a kafka-python request needs, by the words of its ``what`` (first match wins)
_REQUEST_ACLS = (("ListPartitionReassignments", "Describe on the cluster"),
                 ("AlterPartitionReassignments", "Alter on the cluster"),
                 ("cancelling reassignments", "Alter on the cluster"),
                 ("ElectLeaders", "Alter on the cluster"),
                 ("DescribeLogDirs", "Describe on the cluster"),
                 ("DescribeFeatures", "Describe on the cluster"))


class ReassignConnection:
    """One connection for one command. ``close()`` when done."""

    def __init__(self, conn: ConnectionConfig, timeout: float = 10.0, debug: bool = False) -> None:
        self.conn = conn
        self.timeout = timeout
        self.admin = KafkaAdmin(conn, timeout=timeout)
        self._kp: Any = None
        self._ck: ck.AdminClient | None = None
        quiet_kafka_python(debug)

    def _drop_kafka_python(self) -> None:
        kp, self._kp = self._kp, None
        close_kafka_python(kp)

    def close(self) -> None:
        self._drop_kafka_python()
        self._ck = None
        self.admin.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ errors
    def translate(self, exc: BaseException, what: str) -> OpskitError:
        """The one place vendor exceptions (kafka-python and librdkafka) become opskit's."""
        if isinstance(exc, OpskitError):
            return exc
        if isinstance(exc, ck.KafkaException):
            return self.admin.translate(exc, what)
        from kafka import errors as kerr  # type: ignore[import-untyped]

        if isinstance(exc, (kerr.UnsupportedVersionError, kerr.IncompatibleBrokerVersion)):
            return UnsupportedError(f"the broker does not support {what} ({exc})")
        if "AuthorizationFailed" in type(exc).__name__:
            # kafka-python's text carries the whole request and the broker's session: one
            # line naming the ACL instead
            acl = next((a for key, a in _REQUEST_ACLS if key in what), "an ACL")
            return NotAuthorisedError(f"not authorised for {what}: {self.conn.principal} needs "
                                      f"{acl}")
        if isinstance(exc, (kerr.SaslAuthenticationFailedError,
                            kerr.UnsupportedSaslMechanismError)):
            return AuthenticationError(f"authentication failed at {self.conn.bootstrap} ({what}) "
                                       f"for {self.conn.principal} with mechanism "
                                       f"{self.conn.sasl_mechanism}: {type(exc).__name__}")
        stale = getattr(kerr, "UnknownBrokerIdError", None)
        if stale is not None and isinstance(exc, stale):
            # kafka-python sent the request to a broker its cached metadata still names
            # (the controller it knew, now stopped): transient; a new client reads fresh
            # metadata on the next try
            self._drop_kafka_python()
            return KafkaUnavailableError(f"{what}: broker {exc} is not available (stopped or "
                                         "restarting); will retry")
        unreachable = tuple(getattr(kerr, n) for n in (
            "KafkaTimeoutError", "NoBrokersAvailable", "KafkaConnectionError",
            "BrokerNotAvailableError", "MetadataEmptyBrokerList", "RequestTimedOutError",
            "NodeNotReadyError") if hasattr(kerr, n))
        if isinstance(exc, (*unreachable, TimeoutError, OSError)):
            return KafkaUnavailableError(f"cannot reach Kafka at {self.conn.bootstrap} ({what}, "
                                         f"timeout {self.timeout:g}s): {exc or type(exc).__name__}")
        if isinstance(exc, kerr.KafkaError):
            return KafkaOperationError(f"{what} failed: {type(exc).__name__}: {exc}")
        return KafkaOperationError(f"{what} failed: {type(exc).__name__}: {exc}")

    def require(self) -> None:
        """UnsupportedError naming the first API the broker does not advertise."""
        caps = self.admin.capabilities
        for name, v in NEEDED_APIS:
            if not caps.supports(caps_mod.API_KEYS[name], v):
                raise UnsupportedError(
                    f"the broker at {caps.broker or caps.bootstrap} does not support {name} "
                    f"(API key {caps_mod.API_KEYS[name]}), needed for partition reassignment")

    def require_acls(self, command: str, topics: Iterable[str],
                     only: frozenset[tuple[str, str]] | None = None,
                     label: str | None = None) -> None:
        """Before a mutation: NotAuthorisedError (exit 6) naming every required ACL of
        ``command`` (:data:`opskit.core.acl_needs.COMMAND_NEEDS`) the principal lacks
        (:func:`opskit.adapters.acls.check.require_acls`), so a refused run changes nothing."""
        from opskit.adapters.acls.check import require_acls

        require_acls(self.admin, command, topics, only=only, label=label)

    # ------------------------------------------------------------------ clients
    @property
    def kp(self) -> Any:
        if self._kp is None:
            try:
                from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
            except ImportError as e:  # pragma: no cover - a declared dependency
                raise UnsupportedError("kafka-python is not installed") from e
            try:
                self._kp = KafkaAdminClient(**kafka_python_config(self.conn, self.timeout))
            except Exception as e:
                raise self.translate(e, "connecting for partition reassignment") from e
        return self._kp

    @property
    def ckadmin(self) -> ck.AdminClient:
        if self._ck is None:
            conf = self.conn.to_librdkafka()
            conf["socket.timeout.ms"] = int(max(self.timeout, 1) * 1000)
            conf["logger"] = logging.getLogger("opskit.librdkafka")
            self._ck = ck.AdminClient(conf)
        return self._ck

    def _ms(self) -> int:
        return int(self.timeout * 1000)
