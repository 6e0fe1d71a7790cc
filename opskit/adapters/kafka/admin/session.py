"""The admin's connection to one cluster: librdkafka's client made on first use, the
broker's capabilities (ApiVersions, probed once per bootstrap), and bounded waits.

Before an operation that needs an API beyond Metadata, the broker's ApiVersions are
checked: an API the broker does not advertise gives ``UnsupportedError`` naming the
API and the broker at once, instead of a request that some Kafka-compatible brokers
answer by dropping the connection."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Self, TypeVar

from opskit.adapters.kafka import capabilities as caps_mod
from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.errors import ErrorTranslation, error_text
from opskit.adapters.kafka.broker_quirks import BrokerQuirks
from opskit.adapters.kafka.capabilities import Capabilities
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from opskit.errors import (
    KafkaOperationError,
    KafkaUnavailableError,
    OpskitError,
    UnsupportedError,
)

rdlog = logging.getLogger("opskit.librdkafka")

T = TypeVar("T")


class AdminSession(ErrorTranslation):
    """A connected admin client's state. Create one per command; call ``close()`` when done."""

    def __init__(self, conn: ConnectionConfig, timeout: float = 10.0,
                 quirks: BrokerQuirks | None = None) -> None:
        self.conn = conn
        self.timeout = timeout
        #: what the brokers were seen to do wrong in this run (the exporter passes one
        #: record for its lifetime: see :mod:`opskit.adapters.kafka.broker_quirks`)
        self.quirks = quirks if quirks is not None else BrokerQuirks()
        self._last_error: str | None = None
        self._lock = threading.Lock()
        self._conf = conn.to_librdkafka()
        self._conf.update({
            "logger": rdlog,
            "error_cb": self._on_error,
            "socket.timeout.ms": int(max(timeout, 1) * 1000),
            "socket.connection.setup.timeout.ms": int(max(timeout, 1) * 1000),
        })
        self._client: ck.AdminClient | None = None
        self._closed = False
        self.round_trips = 0
        self._caps: Capabilities | None = None
        #: an authentication or TLS failure librdkafka reported (error_cb)
        self._auth_error: str | None = None
        #: when listing every group: leave out the groups the principal may not describe
        #: (named in :attr:`unauthorised_groups`) instead of failing on the first
        self.skip_unauthorised_groups = False
        self.unauthorised_groups: set[str] = set()
        #: rounds (exporter cycles, see :meth:`new_round`) in which an API must be seen
        #: closed on before it is remembered as not served (the served exporter: 2)
        self.confirmations = 1
        self._round = 0
        #: api -> (rounds seen, the last round seen in, what was seen): not yet confirmed
        self._suspects: dict[str, tuple[int, int, str]] = {}
        #: (when, answer) of the last fresh-ApiVersions check after a failed request
        self._answers_memo: tuple[float, bool] | None = None
        #: partition -> the translated error of its last failed ListOffsets
        self._offset_failures: dict[TopicPartition, OpskitError] = {}

    @property
    def _admin(self) -> ck.AdminClient:
        """librdkafka's admin client, created on first use: a command served entirely
        by the protocol-level reads never starts it (a bad configuration is then
        reported by the first call that needs it, as a one-line error)."""
        if self._client is None:
            if self._closed:
                raise KafkaOperationError("the Kafka admin client is closed")
            # the probe logs in as librdkafka would: a wrong password, CA or protocol is
            # reported now, after one failed login, instead of librdkafka retrying it
            # until the timeout and reporting a transport failure
            _ = self.capabilities
            try:
                self._client = ck.AdminClient(self._conf)
            except ck.KafkaException as e:
                raise KafkaOperationError(f"invalid client configuration: {error_text(e)}") from e
        return self._client

    # ----- capabilities -----
    @property
    def capabilities(self) -> Capabilities:
        """ApiVersions of the cluster (probed on first use, cached per bootstrap).

        One bootstrap address: the probe may take the whole timeout, and when the server
        says nothing in that time the command fails (KafkaUnavailableError) after at most
        one more second (asking whether it is an HTTP server, to name it) instead of
        librdkafka waiting the timeout again. Several: at most 5 s, so that a silent first
        address leaves librdkafka (which tries every address at once) time to reach the
        others; the total can then exceed the timeout by those 5 s."""
        if self._caps is None:
            single = len(self.conn.bootstrap.split(",")) == 1
            budget = self.timeout if single else min(self.timeout, 5.0)
            caps = caps_mod.probe(self.conn, timeout=budget)
            if caps.silent and single:
                raise KafkaUnavailableError(
                    caps_mod.not_kafka(self.conn, min(self.timeout, 1.0))
                    or f"cannot reach Kafka at {self.conn.bootstrap} (no answer within timeout "
                       f"{self.timeout:g}s)")
            self._caps = caps
        return self._caps

    def require(self, operation: str, what: str | None = None) -> None:
        """Raise UnsupportedError when the broker lacks an API ``operation`` needs, or
        was seen earlier in this run not to serve one it advertises."""
        caps_mod.require(self.capabilities, operation, what)
        dead = self.not_served(operation)
        if dead:
            raise UnsupportedError(
                f"the broker at {self.capabilities.broker or self.conn.bootstrap} advertises "
                f"but does not serve {'; '.join(dead)}, needed for "
                f"{what or operation.replace('_', ' ')}")

    def unavailable(self, operation: str) -> list[str]:
        """Why ``operation`` cannot be done on this broker: APIs not advertised, or
        advertised and seen not served (empty: it can be tried)."""
        return caps_mod.missing_for(self.capabilities, operation) + self.not_served(operation)

    def not_served(self, operation: str) -> list[str]:
        """The APIs of ``operation`` this broker advertises and was seen not to serve."""
        out: list[str] = []
        for api, _v in caps_mod.OPERATION_APIS[operation]:
            q = self.quirks.dead_api(api)
            if q is not None:
                out.append(f"{api} ({q.detail})")
        return out

    def close(self) -> None:
        # AdminClient has no close(); dropping the reference lets librdkafka tear down.
        self._client = None
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _result(self, fut: Future[T], what: str, operation: str | None = None,
                deadline: float | None = None) -> T:
        """The future's result within ``timeout`` + 2 s (or by ``deadline``, monotonic),
        errors translated."""
        self.round_trips += 1
        wait = self.timeout + 2 if deadline is None else max(deadline - time.monotonic(), 0.05)
        try:
            return fut.result(timeout=wait)
        except BaseException as e:
            raise self.translate(e, what, operation) from e

    def _kw(self) -> dict[str, Any]:
        return {"request_timeout": self.timeout}
