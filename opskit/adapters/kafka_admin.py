"""Kafka admin access through confluent-kafka (librdkafka).

This is the one module that talks the admin protocol for reads and topic
changes. Every vendor exception is translated into opskit's error tree here,
and every wait is bounded by the configured timeout: nothing hangs.

Before an operation that needs an API beyond Metadata, the broker's
ApiVersions (probed once per bootstrap, see :mod:`opskit.adapters.capabilities`)
are checked: an API the broker does not advertise gives ``UnsupportedError``
naming the API and the broker at once, instead of a request that some
Kafka-compatible brokers answer by dropping the connection. When a request to
an advertised API times out but the broker still answers ApiVersions, the API
is reported as unsupported by that broker rather than the cluster as
unreachable (the Hanzo Stream gateway, for one, never answers librdkafka's
CreateTopics and DescribeConfigs requests).

An API is *remembered* as not served (later calls refused at once, another path taken:
see :meth:`KafkaAdmin.observe_not_served`) only on evidence that is not a timeout: the
broker closed the connection on it while still answering ApiVersions. A long-lived
admin (the served exporter) needs that seen in two rounds (cycles) without a success
between. A timeout alone is never remembered, except DescribeConfigs within one
command's run (no other path; a command does not wait for it twice).

Requests are batched and issued concurrently: one ListOffsets request per spec
(earliest, latest) for all partitions (librdkafka groups them by leader), one
DescribeGroups for all groups, and one OffsetFetch per group, all in flight at
once (confluent-kafka accepts one group per OffsetFetch call).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from opskit.adapters import capabilities as caps_mod
from opskit.adapters import confluent as ck
from opskit.adapters.broker_quirks import BrokerQuirks
from opskit.adapters.capabilities import Capabilities
from opskit.core.connection import ConnectionConfig
from opskit.core.models import (
    GroupDescription,
    GroupState,
    Member,
    PartitionOffsets,
    TopicPartition,
)
from opskit.errors import (
    AuthenticationError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotAuthorisedError,
    NotFoundError,
    OpskitError,
    UnsupportedError,
)

log = logging.getLogger(__name__)
rdlog = logging.getLogger("opskit.librdkafka")

T = TypeVar("T")

_STATE_MAP = {
    "STABLE": GroupState.STABLE,
    "EMPTY": GroupState.EMPTY,
    "DEAD": GroupState.DEAD,
    "PREPARING_REBALANCING": GroupState.PREPARING_REBALANCE,
    "COMPLETING_REBALANCING": GroupState.COMPLETING_REBALANCE,
    "ASSIGNING": GroupState.ASSIGNING,
    "RECONCILING": GroupState.RECONCILING,
}

_UNREACHABLE = {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE", "_WAIT_COORD",
                "REQUEST_TIMED_OUT", "_TIMED_OUT_QUEUE", "COORDINATOR_NOT_AVAILABLE",
                "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "_DESTROY"}
#: the request got no answer at all (as opposed to a coordinator that is busy)
_NO_ANSWER = {"_TRANSPORT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_TIMED_OUT_QUEUE"}
#: the connection failed under the request (closed by the broker, when it still answers
#: ApiVersions on a fresh one), as opposed to a request that was never answered
_CLOSED = {"_TRANSPORT"}
#: the broker answered, but with bytes librdkafka could not decode
_UNPARSEABLE = {"_BAD_MSG", "_UNDERFLOW"}
_UNSUPPORTED = {"UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE", "INVALID_REQUEST"}
_AUTH = {"SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "_SSL"}
#: the principal lacks an ACL (NotAuthorisedError: optional reads degrade on it)
_AUTHZ = {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}
#: APIs remembered as not served once a broker closed or ignored them while still answering
#: ApiVersions (see :mod:`opskit.adapters.broker_quirks`): those with another path or that
#: are optional. The reads every command needs are never written off for a run.
_REMEMBERED_APIS = frozenset({"DescribeGroups", "ListGroups", "DescribeConfigs"})


@dataclass(frozen=True)
class PartitionMeta:
    partition: int
    leader: int  # -1 when there is no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class BrokerMeta:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ClusterMeta:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerMeta, ...]
    topics: Mapping[str, tuple[PartitionMeta, ...]]
    #: topics asked for by name that the principal may not describe (no Describe ACL)
    denied_topics: tuple[str, ...] = ()

    @property
    def partition_counts(self) -> dict[str, int]:
        return {t: len(ps) for t, ps in self.topics.items()}


@dataclass
class OffsetsResult:
    offsets: dict[TopicPartition, PartitionOffsets] = field(default_factory=dict)
    errors: dict[TopicPartition, str] = field(default_factory=dict)


#: librdkafka's answer for a partition asked for by name that has no committed offset
_LIBRDKAFKA_NO_OFFSET = -1001


def _merge_committed(into: dict[TopicPartition, int], gid: str, res: Any,
                     invalid: dict[TopicPartition, int], unreadable: dict[TopicPartition, str]
                     ) -> None:
    for tp in res.topic_partitions or []:
        if tp.error is not None:
            # an error is not "no commit" (TOPIC_AUTHORIZATION_FAILED on a topic named
            # without the Describe ACL): kept apart, for the lag to flag
            log.debug("group %s %s:%s offset error %s", gid, tp.topic, tp.partition, tp.error)
            unreadable[TopicPartition(tp.topic, tp.partition)] = (
                tp.error.name() if isinstance(tp.error, ck.KafkaError) else str(tp.error))
            continue
        if tp.offset >= 0:
            into[TopicPartition(tp.topic, tp.partition)] = tp.offset
        elif tp.offset not in (-1, _LIBRDKAFKA_NO_OFFSET):
            # not an offset, and neither Kafka's "none" (-1) nor librdkafka's (-1001, what it
            # answers for a partition asked for by name without a commit): kept apart, for
            # the lag to flag
            invalid[TopicPartition(tp.topic, tp.partition)] = tp.offset


def error_name(exc: BaseException) -> str:
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def _parse_failure(exc: BaseException) -> bool:
    """librdkafka could not decode the broker's answer (it reports some such failures
    under other codes, with this text)."""
    text = error_text(exc).lower()
    return "failed to parse" in text or "parse failure" in text or "read underflow" in text


def error_text(exc: BaseException) -> str:
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        e = exc.args[0]
        return f"{e.name()}: {e.str()}"
    return str(exc) or type(exc).__name__


class KafkaAdmin:
    """A connected admin client. Create one per command; call ``close()`` when done."""

    def __init__(self, conn: ConnectionConfig, timeout: float = 10.0,
                 quirks: BrokerQuirks | None = None) -> None:
        self.conn = conn
        self.timeout = timeout
        #: what the brokers were seen to do wrong in this run (the exporter passes one
        #: record for its lifetime: see :mod:`opskit.adapters.broker_quirks`)
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
        #: group -> partition -> a negative committed offset below -1 (not an offset, not
        #: "none"): left out of :meth:`committed_offsets`, kept for the lag to flag
        self.invalid_commits: dict[str, dict[TopicPartition, int]] = {}
        #: group -> partition -> the error OffsetFetch answered instead of its committed
        #: offset (TOPIC_AUTHORIZATION_FAILED...): left out of :meth:`committed_offsets`,
        #: kept for the lag to flag. Both are of the group's last read.
        self.unreadable_commits: dict[str, dict[TopicPartition, str]] = {}
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

    def close(self) -> None:
        # AdminClient has no close(); dropping the reference lets librdkafka tear down.
        self._client = None
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- error translation: the one place -----
    def translate(self, exc: BaseException, what: str, operation: str | None = None) -> OpskitError:
        if isinstance(exc, OpskitError):
            return exc
        name = error_name(exc)
        if name in _AUTH or (self._auth_error and (isinstance(exc, TimeoutError) or name in _UNREACHABLE)):
            # librdkafka fails the request as a transport error; error_cb had the cause
            return AuthenticationError(f"authentication or TLS failure at {self.conn.bootstrap} "
                                       f"({what}): {self._auth_error or error_text(exc)}")
        if name in _UNPARSEABLE or _parse_failure(exc):
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

    # ----- cluster -----
    def metadata(self, topic: str | None = None) -> ClusterMeta:
        self.round_trips += 1
        try:
            md = self._admin.list_topics(topic=topic, timeout=self.timeout)
        except BaseException as e:
            raise self.translate(e, "reading cluster metadata") from e
        topics: dict[str, tuple[PartitionMeta, ...]] = {}
        denied: list[str] = []
        for name, t in md.topics.items():
            if t.error is not None and t.error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if t.error is not None and t.error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
                denied.append(name)  # asked for by name, no Describe ACL: not "missing"
                continue
            parts = tuple(
                PartitionMeta(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            )
            topics[name] = parts
        brokers = tuple(sorted(
            (BrokerMeta(b.id, b.host, b.port) for b in md.brokers.values()), key=lambda b: b.node_id
        ))
        return ClusterMeta(md.cluster_id, md.controller_id, brokers, topics, tuple(sorted(denied)))

    def broker_racks(self) -> dict[int, str | None]:
        """broker id -> rack (None for a broker without one), from DescribeCluster."""
        res = self._result(self._admin.describe_cluster(**self._kw()), "describing the cluster")
        return {int(n.id): (n.rack or None) for n in res.nodes}

    # ----- groups -----
    def list_groups(self) -> dict[str, GroupState]:
        self.require("list_groups", "listing consumer groups")
        res = self._result(self._admin.list_consumer_groups(**self._kw()), "listing consumer groups",
                           "list_groups")
        if res.errors:
            # a broker that could not list its groups is not a broker without groups: the
            # list is incomplete, and "no groups" (or some) would be a false answer
            first = res.errors[0]
            exc = first if isinstance(first, BaseException) else ck.KafkaException(first)
            raise self.translate(exc, "listing consumer groups", "list_groups")
        self.served("list_groups")
        return {g.group_id: _STATE_MAP.get(g.state.name, GroupState.UNKNOWN) for g in res.valid}

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        ids = sorted(set(group_ids))
        if not ids:
            return {}
        self.require("describe_groups", "describing consumer groups")
        futs = self._admin.describe_consumer_groups(ids, **self._kw())
        out: dict[str, GroupDescription] = {}
        for gid, fut in futs.items():
            try:
                d = self._result(fut, f"describing group {gid}", "describe_groups")
            except NotAuthorisedError:
                if not self.skip_unauthorised_groups:
                    raise
                self.unauthorised_groups.add(gid)
                continue
            self.served("describe_groups")
            members = tuple(
                Member(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.host.lstrip("/"),
                    assignment=tuple(sorted(
                        TopicPartition(tp.topic, tp.partition)
                        for tp in (m.assignment.topic_partitions if m.assignment else [])
                    )),
                )
                for m in d.members
            )
            state = d.state
            st = _STATE_MAP.get(state.name if isinstance(state, ck.ConsumerGroupState) else str(state),
                                GroupState.UNKNOWN)
            out[gid] = GroupDescription(
                group_id=gid, state=st, members=members,
                protocol_type="consumer" if not d.is_simple_consumer_group else "simple",
                coordinator=d.coordinator.id if d.coordinator is not None else None,
            )
        return out

    def committed_offsets(self, group_ids: Iterable[str],
                          partitions: Iterable[TopicPartition] | None = None,
                          ) -> dict[str, dict[TopicPartition, int]]:
        """Committed offsets per group: on all partitions the group committed on, or
        only on ``partitions`` (an explicit list, which some Kafka-compatible brokers
        answer where they return nothing for "all partitions of the group").

        A named list that spans several topics goes in one request per group, unless
        the broker answered such a request with something librdkafka cannot parse (the
        Hanzo gateway): then, and for the rest of the run, one request per topic."""
        ids = sorted(set(group_ids))
        if ids:
            self.require("committed_offsets", "reading committed offsets")
        explicit = None if partitions is None else sorted(set(partitions))
        if explicit is not None and not explicit:
            return {}
        chunks = self._offset_fetch_chunks(explicit)
        for gid in ids:  # of this read only (an exporter's admin reads the groups every cycle)
            self.invalid_commits[gid] = {}
            self.unreadable_commits[gid] = {}
        # one group per request (confluent-kafka's limit); all in flight at once
        futs = [(gid, chunk, self._submit_offset_fetch(gid, chunk)) for gid in ids for chunk in chunks]
        out: dict[str, dict[TopicPartition, int]] = {}
        denied: set[str] = set()
        again: list[str] = []
        for gid, chunk, fut in futs:
            what = f"reading committed offsets of group {gid}"
            self.round_trips += 1
            try:
                res = fut.result(timeout=self.timeout + 2)
            except BaseException as e:
                if chunk is not None and len({tp.topic for tp in chunk}) > 1 and (
                        error_name(e) in _UNPARSEABLE or _parse_failure(e)):
                    self.quirks.note_offset_fetch_per_topic(
                        self.capabilities.broker or self.conn.bootstrap,
                        f"an OffsetFetch naming {len({tp.topic for tp in chunk})} topics got an "
                        f"answer librdkafka cannot parse ({error_text(e)})")
                    again.append(gid)
                    continue
                err = self.translate(e, what, "committed_offsets")
                if not (isinstance(err, NotAuthorisedError) and self.skip_unauthorised_groups):
                    raise err from e
                denied.add(gid)
                continue
            _merge_committed(out.setdefault(gid, {}), gid, res,
                             self.invalid_commits.setdefault(gid, {}),
                             self.unreadable_commits.setdefault(gid, {}))
        if again:  # the same groups, one topic per request this time
            for gid, offs in self.committed_offsets(again, explicit).items():
                out.setdefault(gid, {}).update(offs)
            denied |= self.unauthorised_groups & set(again)
        for gid in denied:
            self.unauthorised_groups.add(gid)
            out.pop(gid, None)
        return out

    def _offset_fetch_chunks(self, explicit: list[TopicPartition] | None
                             ) -> list[list[TopicPartition] | None]:
        """The partition lists of a group's OffsetFetch requests: all in one, or one
        list per topic on a broker that cannot answer several topics at once."""
        if explicit is None or self.quirks.offset_fetch_per_topic is None:
            return [explicit]
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in explicit:
            by_topic.setdefault(tp.topic, []).append(tp)
        return [by_topic[t] for t in sorted(by_topic)]

    def _submit_offset_fetch(self, gid: str, chunk: list[TopicPartition] | None) -> Future[Any]:
        tps = None if chunk is None else [ck.TopicPartition(tp.topic, tp.partition) for tp in chunk]
        futs = self._admin.list_consumer_group_offsets(
            [ck.ConsumerGroupTopicPartitions(gid, tps)], **self._kw())
        return next(iter(futs.values()))

    # ----- partitions -----
    def _submit_offsets(self, tps: list[TopicPartition], spec: ck.OffsetSpec,
                        what: str) -> dict[Any, Future[Any]]:
        if not tps:
            return {}
        self.require("log_offsets", what)
        req = {ck.TopicPartition(tp.topic, tp.partition): spec for tp in tps}
        self.round_trips += 1
        try:
            return self._admin.list_offsets(req, **self._kw())  # type: ignore[no-any-return]
        except BaseException as e:
            raise self.translate(e, what) from e

    def _collect_offsets(self, futs: dict[Any, Future[Any]], what: str
                         ) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, str]]:
        ok: dict[TopicPartition, tuple[int, int]] = {}
        errs: dict[TopicPartition, str] = {}
        unreachable: OpskitError | None = None
        for ck_tp, fut in futs.items():
            tp = TopicPartition(ck_tp.topic, ck_tp.partition)
            try:
                r = fut.result(timeout=self.timeout + 2)
                ok[tp] = (r.offset, r.timestamp)
            except BaseException as e:  # noqa: BLE001 - per-partition failures are data
                translated = self.translate(e, what, "log_offsets")
                if isinstance(translated, KafkaUnavailableError):
                    unreachable = translated
                self._offset_failures[tp] = translated
                errs[tp] = error_text(e)
        if futs and not ok and unreachable is not None:
            raise unreachable  # nothing answered at all: the cluster is unreachable
        return ok, errs

    def log_offsets(self, tps: Iterable[TopicPartition]) -> OffsetsResult:
        """Log start and high watermark of each partition (two batched ListOffsets in flight)."""
        wanted = sorted(set(tps))
        f_start = self._submit_offsets(wanted, ck.OffsetSpec.earliest(), "reading log start offsets")
        f_end = self._submit_offsets(wanted, ck.OffsetSpec.latest(), "reading log end offsets")
        start, e1 = self._collect_offsets(f_start, "reading log start offsets")
        end, e2 = self._collect_offsets(f_end, "reading log end offsets")
        res = OffsetsResult()
        for tp in wanted:
            if tp in start and tp in end and start[tp][0] >= 0 and end[tp][0] >= 0:
                res.offsets[tp] = PartitionOffsets(tp, start[tp][0], end[tp][0])
            elif tp in start and tp in end:
                # librdkafka hands a failed request (a connection the broker closed on
                # ListOffsets) back as offset -1001 without an error: no offset is known,
                # and its broker state is stale for a while: start afresh
                self._client = None
                res.errors[tp] = (f"no log offset from the broker at {self._where()} "
                                  f"(ListOffsets answered {start[tp][0]} / {end[tp][0]}: the "
                                  "request failed)")
            else:
                res.errors[tp] = e1.get(tp) or e2.get(tp) or "no answer"
        return res

    def offsets_for_times(self, tps: Iterable[TopicPartition], ts_ms: int) -> dict[TopicPartition, int | None]:
        """Earliest offset whose timestamp >= ts_ms per partition (None: no such record)."""
        what = "looking up offsets by timestamp"
        ok, errs = self._collect_offsets(
            self._submit_offsets(sorted(set(tps)), ck.OffsetSpec.for_timestamp(ts_ms), what), what)
        if errs:
            tp, msg = next(iter(errs.items()))
            cause = self._offset_failures.get(tp)
            if isinstance(cause, UnsupportedError | KafkaUnavailableError):
                raise cause  # the same cause, the same exit (3) as on every other path
            raise KafkaOperationError(f"offset lookup by time failed for {tp}: {msg}")
        failed = sorted(tp for tp, (off, _ts) in ok.items() if off < -1)
        if failed:  # -1001: librdkafka's shape of a request that failed (a closed connection)
            self._client = None
            raise UnsupportedError(
                f"no answer from the broker at {self._where()} to ListOffsets by timestamp "
                f"for {failed[0]} (offset {ok[failed[0]][0]}: the request failed)")
        return {tp: (off if off >= 0 else None) for tp, (off, _ts) in ok.items()}

    # ----- topics -----
    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, tuple[str | None, bool]]]:
        """topic -> {config: (value, is_default)}."""
        res = [ck.ConfigResource(ck.ResourceType.TOPIC, t) for t in sorted(set(topics))]
        if not res:
            return {}
        self.require("topic_configs", "reading topic configs")
        futs = self._admin.describe_configs(res, **self._kw())
        # one deadline for the whole request: librdkafka does not end a DescribeConfigs
        # that a broker never answers (the Hanzo gateway) at its request timeout
        deadline = time.monotonic() + self.timeout
        out: dict[str, dict[str, tuple[str | None, bool]]] = {}
        for r, fut in futs.items():
            entries = self._result(fut, f"describing configs of topic {r.name}", "topic_configs",
                                   deadline)
            out[r.name] = {
                k: (v.value, bool(v.is_default) or v.source == 5)  # 5 = DEFAULT_CONFIG
                for k, v in entries.items()
            }
        return out

    def broker_configs(self, brokers: Iterable[int]) -> dict[int, dict[str, tuple[str | None, bool]]]:
        """broker id -> {config: (value, is_default)}: one DescribeConfigs per broker (a
        broker describes only itself), all sent before any answer is awaited. A broker
        that does not answer is left out and logged; the others still count."""
        ids = sorted(set(brokers))
        if not ids:
            return {}
        self.require("topic_configs", "reading broker configs")  # the same DescribeConfigs API
        futs = [(b, self._admin.describe_configs([ck.ConfigResource(ck.ResourceType.BROKER, str(b))],
                                                 **self._kw())) for b in ids]
        deadline = time.monotonic() + self.timeout  # one wait for all (see topic_configs)
        out: dict[int, dict[str, tuple[str | None, bool]]] = {}
        for b, by_res in futs:
            for fut in by_res.values():
                try:
                    entries = self._result(fut, f"describing configs of broker {b}",
                                           deadline=deadline)
                except OpskitError as e:
                    log.warning("could not read configs of broker %s: %s", b, e)
                    continue
                out[b] = {k: (v.value, bool(v.is_default) or v.source == 5)  # 5 = DEFAULT_CONFIG
                          for k, v in entries.items()}
        return out

    def create_topics(self, topics: list[tuple[str, int, int, dict[str, str]]]) -> None:
        new = [ck.NewTopic(n, num_partitions=p, replication_factor=rf, config=cfg) for n, p, rf, cfg in topics]
        if not new:
            return
        self.require("create_topics", "creating topics")
        futs = self._admin.create_topics(new, operation_timeout=self.timeout, **self._kw())
        for name, fut in futs.items():
            self._result(fut, f"creating topic {name}", "create_topics")

    def alter_topic_configs(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        res = []
        for topic, cfg in changes.items():
            r = ck.ConfigResource(ck.ResourceType.TOPIC, topic, incremental_configs=[
                ck.ConfigEntry(k, v, incremental_operation=ck.AlterConfigOpType.SET) for k, v in cfg.items()
            ])
            res.append(r)
        if not res:
            return
        self.require("alter_topic_configs", "altering topic configs")
        futs = self._admin.incremental_alter_configs(res, **self._kw())
        for r, fut in futs.items():
            self._result(fut, f"altering configs of topic {r.name}", "alter_topic_configs")

    def alter_broker_configs(self, brokers: Iterable[int], changes: Mapping[str, str]) -> None:
        """Set dynamic per-broker configs on each of ``brokers`` (one request per broker:
        a broker resource must go to that broker). confluent-kafka refuses the empty
        resource name of the cluster-wide default, so defaults are set per broker."""
        self.require("alter_broker_configs", "altering broker configs")
        for b in brokers:
            r = ck.ConfigResource(ck.ResourceType.BROKER, str(b), incremental_configs=[
                ck.ConfigEntry(k, v, incremental_operation=ck.AlterConfigOpType.SET)
                for k, v in changes.items()])
            for fut in self._admin.incremental_alter_configs([r], **self._kw()).values():
                self._result(fut, f"altering configs of broker {b}", "alter_broker_configs")

    def create_partitions(self, increases: Mapping[str, int]) -> None:
        new = [ck.NewPartitions(t, n) for t, n in increases.items()]
        if not new:
            return
        self.require("create_partitions", "adding partitions")
        futs = self._admin.create_partitions(new, operation_timeout=self.timeout, **self._kw())
        for t, fut in futs.items():
            self._result(fut, f"adding partitions to topic {t}", "create_partitions")

    def delete_topics(self, topics: Iterable[str]) -> None:
        names = sorted(set(topics))
        if not names:
            return
        self.require("delete_topics", "deleting topics")
        futs = self._admin.delete_topics(names, operation_timeout=self.timeout, **self._kw())
        for t, fut in futs.items():
            self._result(fut, f"deleting topic {t}", "delete_topics")
