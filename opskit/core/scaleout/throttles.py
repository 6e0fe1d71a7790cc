"""What a playbook step's reassignment left behind about replication throttles, as its
journal tells it, for the exit line of a run that stopped inside that step (the scale-out's
``raise_rf``, the multi-rack ``spread``): a line opskit could not check must not claim
either way.

Pure: the adapter reads the reassignment journal (``state.json`` and ``events.jsonl``)
and passes its phase and events here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any


class Throttles(enum.Enum):
    NONE = "none"          # the step's reassignment never asked Kafka for a throttle
    SET = "set"            # set and not removed: they stay until the reassignment ends
    REMOVED = "removed"    # set, then removed by the reassignment's cleanup
    UNKNOWN = "unknown"    # the journal cannot tell (missing, unreadable, mid-request)


#: phases of an execution in which the throttles it set are in place (ThrottlesSet was
#: recorded by the transition out of THROTTLE, and CLEANUP has not removed them)
_HELD = ("moving", "elect")


def throttles_of(phase: str | None, events: Sequence[Mapping[str, Any]]) -> Throttles:
    """The throttles of one execution: ``phase`` of its saved state (None: no state, the
    execution never began: it saves its state before any request) and its events (the
    ``set_throttles`` and ``remove_throttles`` records are written before the request
    leaves). Only the events since the last ``start`` count: a plan executed again
    starts a new execution in the same journal."""
    if phase is None:
        return Throttles.NONE
    starts = [i for i, e in enumerate(events) if e.get("kind") == "start"]
    current = list(events[starts[-1]:] if starts else events)
    kinds = [str(e.get("kind")) for e in current]
    if "set_throttles" not in kinds:
        return Throttles.NONE            # a plan moving no data, or stopped before THROTTLE
    after = kinds[len(kinds) - 1 - kinds[::-1].index("set_throttles"):]
    if "throttle_mismatch" in after:
        return Throttles.UNKNOWN         # restored, but Kafka showed other values after
    if phase in ("done", "uncordon"):
        return Throttles.REMOVED         # only ThrottlesRemoved leads out of CLEANUP
    if phase in _HELD or (phase == "cleanup" and "remove_throttles" not in after):
        return Throttles.SET
    # "throttle": the request was recorded, maybe never applied; "cleanup" after
    # remove_throttles: maybe partly restored; anything else: not a phase this reads
    return Throttles.UNKNOWN
