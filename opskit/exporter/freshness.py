"""What each metric family's data is worth: read or not, how old, how long it took (pure).

The exporter reads Kafka in *families* (metadata, consumer groups, log offsets,
topic configs, ...), each on its own schedule. A family whose read failed is
never served as if it were fine: its ``opskit_exporter_family_up`` is 0, its
error is counted by kind, and when it is one the lag depends on (``CORE``)
``opskit_kafka_up`` is 0 too -- ``up`` means "the data served is current", not
"a socket opened". Data kept from an earlier read (the slow families: configs,
sizes, record times, the quorum) is served with its age
(``opskit_exporter_data_age_seconds``), so staleness is visible per family.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from opskit.errors import OpskitError
from opskit.exporter.options import ExporterOptions

#: every family the exporter reads, in the order a cycle reads them
FAMILIES = ("metadata", "groups", "offsets", "topic_configs", "broker_configs",
            "record_times", "log_dirs", "quorum", "reassignments")
#: the families every lag series and lag alert depends on: when one of them could not
#: be read in the latest cycle, ``opskit_kafka_up`` is 0 (the data is not current)
CORE = ("metadata", "groups", "offsets")
#: families read on the collection loop itself; the others are read beside it
FAST = CORE


def families_for(options: ExporterOptions) -> tuple[str, ...]:
    """The families this exporter is configured to read."""
    off = set()
    if not options.lag_time:
        off.add("record_times")
    if not options.log_dirs:
        off.add("log_dirs")
    if not options.kafka_python:
        off |= {"quorum", "reassignments"}
    return tuple(f for f in FAMILIES if f not in off)


@dataclass(frozen=True)
class FamilyRead:
    """The state of one family after its latest read."""

    #: the latest read succeeded
    ok: bool
    #: epoch seconds when the data held for this family was read; None: none held
    data_at_s: float | None
    #: error kind and first line of the message when the latest read failed
    kind: str | None = None
    message: str | None = None
    #: seconds the latest read took
    read_s: float | None = None
    #: how often the family is read (seconds); the data's age is judged against it
    refresh_s: float = 0.0
    #: reads so far (a new failure is counted once, when this changes)
    attempt: int = 0

    def failed(self, kind: str, message: str) -> FamilyRead:
        """The same data, marked as not current (a cycle that failed as a whole)."""
        return replace(self, ok=False, kind=kind, message=message)


def core_failure(families: dict[str, FamilyRead] | None) -> tuple[str, FamilyRead] | None:
    """The first core family whose latest read failed, if any."""
    for name in CORE:
        r = (families or {}).get(name)
        if r is not None and not r.ok:
            return name, r
    return None


_KIND = {"unreachable": "unreachable", "unsupported": "unsupported", "kafka_error": "kafka",
         "not_found": "kafka", "inconsistent": "kafka", "incomplete": "kafka",
         "authentication": "auth"}


def error_kind(exc: BaseException) -> str:
    """The ``kind`` label an error is counted under."""
    if isinstance(exc, OpskitError):
        return _KIND.get(exc.kind, "internal")
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "internal"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
