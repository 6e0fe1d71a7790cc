"""Kafka topic names and ``--topic`` selections (``topic`` or ``topic:0,1,2``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from opskit.errors import InvalidInputError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
DIGITS = re.compile(r"[0-9]+")


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Kafka topic name (Kafka's ``Topic.validate``), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > 249:
        return f"topic name is {len(name)} characters long (at most 249)"
    if not _TOPIC_CHARS.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    return None


@dataclass(frozen=True)
class TopicSelection:
    """One ``--topic`` argument: a topic, and its partitions or None for all of them."""

    topic: str
    partitions: tuple[int, ...] | None = None

    def __str__(self) -> str:
        if self.partitions is None:
            return self.topic
        return f"{self.topic}:{','.join(str(p) for p in self.partitions)}"


def parse_topic_scope(arg: str) -> TopicSelection:
    """Parse one ``--topic`` value: ``topic`` or ``topic:0,1,2``.

    Tool fact (3.7 ``ConsumerGroupService.parseTopicPartitionsToReset`` /
    ``parseTopicsWithPartitions``; 4.x ``GroupOffsetsResetter`` same names): an
    argument containing ':' is split on ':' into exactly two parts, the second
    split on ',' with each item read by ``Integer.parseInt``; otherwise it names
    a whole topic (all its partitions, from DescribeTopics). Java's ``split``
    drops trailing empty strings, so ``t:0,1,`` is accepted and kept here.
    opskit is stricter where the tool would fail later or misread: topic names
    are validated, partitions must be plain non-negative ASCII integers.
    """
    if ":" not in arg:
        problem = topic_name_problem(arg)
        if problem:
            raise InvalidInputError(f"invalid --topic {arg!r}: {problem}")
        return TopicSelection(arg, None)
    topic, _, rest = arg.partition(":")
    items = rest.split(",")
    while items and items[-1] == "":
        items.pop()
    if ":" in rest or not items:
        raise InvalidInputError(
            f"invalid --topic {arg!r}: expected a topic name, or topic:partition,partition,..."
        )
    problem = topic_name_problem(topic)
    if problem:
        raise InvalidInputError(f"invalid --topic {arg!r}: {problem}")
    partitions: set[int] = set()
    for item in items:
        if not DIGITS.fullmatch(item) or int(item) > INT32_MAX:
            raise InvalidInputError(f"invalid partition {item!r} in --topic {arg!r}")
        partitions.add(int(item))
    return TopicSelection(topic, tuple(sorted(partitions)))
