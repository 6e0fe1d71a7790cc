"""What a broker was seen to do wrong, remembered so that opskit takes the path that works.

ApiVersions says what a broker claims (:mod:`opskit.adapters.kafka.capabilities`). Some
Kafka-compatible brokers claim more than they do. What opskit learns while talking
to one is kept here, in one record per cluster, so that a failing or slow path is
tried once and then avoided:

* **an API advertised but not served**: the broker closes the connection on it or
  never answers it (Heraclitus: DescribeGroups, ListGroups, DescribeConfigs; the
  Hanzo Stream gateway: DescribeConfigs). Later calls treat it as unsupported at
  once, naming what was seen, instead of waiting out the timeout again;
* **OffsetFetch one topic at a time**: an OffsetFetch naming two or more topics is
  answered in a form clients cannot parse (the gateway adds a per-topic error code
  that Kafka's format does not have); later reads ask one topic per request;
* **offsets by time that cannot be trusted**: a ListOffsets-by-timestamp answer
  failed verification against the records (the gateway answers 0, Heraclitus the
  log end, whatever the time); later lookups are refused at once.

A command's :class:`~opskit.adapters.kafka.admin.client.KafkaAdmin` holds one record for its
run. The exporter keeps one for its lifetime and hands it to every admin it creates,
so a path seen failing is not tried every cycle (what counts as seen, and how often:
:meth:`~opskit.adapters.kafka.admin.client.KafkaAdmin.observe_not_served`; never a timeout alone). A remembered dead API is tried again after
``recheck_s`` (a broker upgraded under a long-running exporter is noticed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = ["RECHECK_S", "BrokerQuirks", "Quirk"]

#: seconds after which an API remembered as not served is tried again
RECHECK_S = 600.0


@dataclass(frozen=True)
class Quirk:
    """One thing a broker was seen to do wrong."""

    #: host:port (or bootstrap list) where it was seen
    broker: str
    #: what was seen, in words (ends up in error messages and notes)
    detail: str
    #: when (monotonic seconds)
    since: float


class BrokerQuirks:
    """The quirks of one cluster's brokers, learned during a run. Thread-safe."""

    def __init__(self, recheck_s: float = RECHECK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.recheck_s = recheck_s
        self._clock = clock
        self._lock = threading.Lock()
        self._dead_apis: dict[str, Quirk] = {}
        self._offset_fetch_per_topic: Quirk | None = None
        self._time_lookups: Quirk | None = None

    # ----- APIs advertised but not served -----
    def dead_api(self, api: str) -> Quirk | None:
        """The quirk of ``api`` (a Kafka API name) when it was seen not served and is
        not yet due for another try; else None."""
        with self._lock:
            q = self._dead_apis.get(api)
            if q is not None and self._clock() - q.since >= self.recheck_s:
                del self._dead_apis[api]
                return None
            return q

    def note_dead_api(self, api: str, broker: str, detail: str) -> None:
        with self._lock:
            if api not in self._dead_apis:
                log.info("broker %s: %s advertised but not served (%s); treated as unsupported "
                         "for the next %gs", broker, api, detail, self.recheck_s)
            self._dead_apis[api] = Quirk(broker, detail, self._clock())

    # ----- OffsetFetch -----
    @property
    def offset_fetch_per_topic(self) -> Quirk | None:
        """Set when an OffsetFetch naming several topics got an unparseable answer."""
        return self._offset_fetch_per_topic

    def note_offset_fetch_per_topic(self, broker: str, detail: str) -> None:
        with self._lock:
            if self._offset_fetch_per_topic is None:
                log.info("broker %s: %s; asking OffsetFetch one topic per request", broker, detail)
                self._offset_fetch_per_topic = Quirk(broker, detail, self._clock())

    # ----- offsets by time -----
    @property
    def untrusted_time_lookups(self) -> Quirk | None:
        """Set when a ListOffsets-by-timestamp answer failed verification."""
        return self._time_lookups

    def note_untrusted_time_lookups(self, broker: str, detail: str) -> None:
        with self._lock:
            if self._time_lookups is None:
                self._time_lookups = Quirk(broker, detail, self._clock())

    def to_dict(self) -> dict[str, object]:
        with self._lock:
            return {
                "apis_not_served": {api: {"broker": q.broker, "detail": q.detail}
                                    for api, q in sorted(self._dead_apis.items())},
                "offset_fetch_per_topic": (None if self._offset_fetch_per_topic is None
                                           else self._offset_fetch_per_topic.detail),
                "untrusted_time_lookups": (None if self._time_lookups is None
                                           else self._time_lookups.detail),
            }
