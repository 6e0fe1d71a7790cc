"""The exporter cycle's fast reads: the consumer groups with their lag, then log offsets.

Both read through the cycle's one session of the reader port, in the order of
:mod:`opskit.adapters.lag.source` (groups and commits, then log offsets: lag is never
negative). A listing that failed raises (the groups family fails); it is never "no
groups". A broker without ListGroups (the Hanzo gateway), or one seen not to serve it
(Heraclitus closes the connection), has the groups named in ``--group-allow`` read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from opskit.adapters.kafka.admin.client import ClusterMeta
from opskit.adapters.kafka.reader import ClusterReader
from opskit.adapters.lag.source import LagReport, collect_lag
from opskit.core.models import GroupLag, LagThresholds, PartitionOffsets, TopicPartition
from opskit.errors import AuthenticationError, KafkaOperationError, NotFoundError, UnsupportedError
from opskit.exporter.options import ExporterOptions, literal_name

log = logging.getLogger(__name__)


class GroupReads:
    """The groups' lag and the partitions' log offsets of one cycle (long-lived: it
    remembers having warned about a broker without ListGroups)."""

    def __init__(self, options: ExporterOptions,
                 thresholds: Callable[[str], LagThresholds] | None) -> None:
        self.options = options
        self.thresholds = thresholds
        self._warned_unlisted = False

    def lag(self, r: ClusterReader, md: ClusterMeta, topics: list[str]) -> LagReport:
        opts = self.options
        topic_arg = topics if opts.topics.active else None
        if r.unavailable("list_groups"):  # not advertised, or seen not served
            return self._lag_unlisted(r, md, topic_arg)
        for attempt in range(2):
            try:
                # every broker is asked; one that fails or closes the connection fails
                # the listing (it is not "no groups")
                listed = r.group_ids_everywhere(md)
            except UnsupportedError:
                if not r.unavailable("list_groups"):
                    raise  # not (yet) evidence enough: this cycle failed, the next one asks
                # advertised but not served (Heraclitus closes it): remembered by the admin,
                # the groups named in --group-allow are read as on a broker without it
                return self._lag_unlisted(r, md, topic_arg)
            ids = [g for g in listed if opts.groups.keep(g)]
            if not ids:
                return LagReport(r.bootstrap, md.cluster_id, [])
            try:
                return self._collect_lag(r, ids, topic_arg, md)
            except NotFoundError:
                if attempt:  # a group vanished between listing and describing, twice
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _lag_unlisted(self, r: ClusterReader, md: ClusterMeta, topic_arg: list[str] | None
                      ) -> LagReport:
        """A broker without ListGroups (the Hanzo gateway): the groups named in
        --group-allow (patterns that are plain names), each read on its own so that one
        without commits does not hide the others; none named: no group series."""
        ids = sorted(n for n in (literal_name(p.pattern) for p in self.options.groups.allow)
                     if n is not None and self.options.groups.keep(n))
        if not ids:
            if not self._warned_unlisted:
                log.warning("the broker cannot list consumer groups (no ListGroups): name them "
                            "with --group-allow NAME to export their lag")
                self._warned_unlisted = True
            raise UnsupportedError("the broker cannot list consumer groups (no ListGroups): "
                                   "name them with --group-allow NAME to export their lag")
        try:
            return self._collect_lag(r, ids, topic_arg, md)
        except NotFoundError:
            pass
        reports: list[LagReport] = []
        for gid in ids:
            try:
                reports.append(self._collect_lag(r, [gid], topic_arg, md))
            except NotFoundError as e:
                log.warning("%s", e)
        out = LagReport(r.bootstrap, md.cluster_id, [g for rep in reports for g in rep.groups])
        for rep in reports:
            out.group_notes.update(rep.group_notes)
            out.offset_errors.update(rep.offset_errors)
        return out

    def _collect_lag(self, r: ClusterReader, ids: list[str], topic_arg: list[str] | None,
                     md: ClusterMeta) -> LagReport:
        return collect_lag(None, ids, topic_arg, self.thresholds, meta=md, reader=r)

    @staticmethod
    def offsets(r: ClusterReader, md: ClusterMeta, topics: list[str], groups: list[GroupLag],
                errors: Mapping[TopicPartition, str]
                ) -> tuple[dict[TopicPartition, PartitionOffsets], BaseException | None]:
        """Log offsets of every kept partition (those the groups' report read, plus the
        rest) and, when some partition with a leader has none, the error to record."""
        out: dict[TopicPartition, PartitionOffsets] = {}
        for g in groups:
            for p in g.partitions:
                if p.log_start is not None and p.log_end is not None and p.tp not in out:
                    out[p.tp] = PartitionOffsets(p.tp, p.log_start, p.log_end)
        led = [TopicPartition(t, p.partition) for t in topics for p in md.topics[t] if p.leader >= 0]
        missing = [tp for tp in led if tp not in out]
        failed: dict[TopicPartition, str] = {}
        error: BaseException | None = None
        if missing:
            # batched ListOffsets per leader at the protocol level (librdkafka for the rest)
            try:
                res = r.log_offsets(missing, md)
                out.update(res.offsets)
                failed.update(res.errors)
            except AuthenticationError:
                raise
            except Exception as e:  # noqa: BLE001 - recorded as the family's error
                error = e
        if error is None:
            failed.update({tp: e for tp, e in errors.items() if tp not in out})
            lost = sorted(tp for tp in led if tp not in out)
            if lost:
                tp = lost[0]
                error = KafkaOperationError(
                    f"log offsets of {len(lost)} partition(s) with a leader could not be read "
                    f"(first: {tp}: {failed.get(tp, 'no answer')})")
        return out, error
