"""Log offsets through the admin: one ListOffsets request per spec (earliest, latest)
for all partitions (librdkafka groups them by leader), and offsets by time."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.errors import error_text
from opskit.adapters.kafka.admin.meta import OffsetsResult
from opskit.adapters.kafka.admin.session import AdminSession
from opskit.core.models import PartitionOffsets, TopicPartition
from opskit.errors import (
    KafkaOperationError,
    KafkaUnavailableError,
    OpskitError,
    UnsupportedError,
)


class OffsetReads(AdminSession):
    """The log-offset reads of :class:`~opskit.adapters.kafka.admin.client.KafkaAdmin`."""

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
            answered = [r[0] for r in (start.get(tp), end.get(tp)) if r is not None]
            if len(answered) == 2 and min(answered) >= 0:
                res.offsets[tp] = PartitionOffsets(tp, start[tp][0], end[tp][0])
            elif len(answered) == 2 or (answered and answered[0] < 0):
                # librdkafka hands a failed request (a connection the broker closed on
                # ListOffsets) back as offset -1001 without an error: no offset is known,
                # and its broker state is stale for a while: start afresh. The other
                # request, in flight at the same time, then often fails on that stale
                # state ("_NOENT: Failed to query partition leaders: No leaders found"):
                # that is not the cause, the failed request is
                self._client = None
                res.errors[tp] = (f"no log offset from the broker at {self._where()} "
                                  f"(ListOffsets answered {' / '.join(map(str, answered))}: "
                                  "the request failed)")
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
