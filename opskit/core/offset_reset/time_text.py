"""ISO-8601 durations (``--by-duration``) and datetimes (``--to-datetime``) as
Kafka's reset tool reads them, and epoch milliseconds back to that text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from opskit.errors import InvalidInputError

#: java.lang.Long limits (java.time.Duration holds its seconds in a long)
_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
NANOS_PER_MS = 1_000_000
_NANOS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII,
)


def _checked_long(value: int, text: str) -> int:
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise InvalidInputError(f"invalid duration {text!r}: overflow (java.time.Duration limits)")
    return value


def parse_duration_nanos(text: str) -> int:
    """Exact nanoseconds of an ISO-8601 duration, as ``java.time.Duration.parse``.

    Tool fact (3.7 ``ConsumerGroupService.prepareOffsetsToReset`` and 4.x
    ``GroupOffsetsResetter.resetByDuration`` call ``Duration.parse``): format
    ``[-+]PnDTnHnMn.nS``, case-insensitive, each number signed, a day is 24 h,
    no years/months/weeks, seconds may carry up to 9 fraction digits after '.'
    or ',', the fraction takes the sign of the seconds, a leading '-' negates
    the whole, "P", "PT" and "P1DT" are invalid, long overflow is an error.
    """
    m = _DURATION.fullmatch(text)
    groups = (2, 4, 5, 6)
    if m is None or (m.group(3) or "").upper() == "T" or all(m.group(g) is None for g in groups):
        raise InvalidInputError(
            f"invalid duration {text!r}: expected ISO-8601 PnDTnHnMn.nS, e.g. PT1H, P1DT12H, PT30M"
        )

    def part(group: int, seconds: int) -> int:
        raw = m.group(group)
        return 0 if raw is None else _checked_long(_checked_long(int(raw), text) * seconds, text)

    days, hours, minutes, secs = part(2, 86_400), part(4, 3_600), part(5, 60), part(6, 1)
    # Duration.create: addExact(days, addExact(hours, addExact(minutes, seconds)))
    total = _checked_long(
        days + _checked_long(hours + _checked_long(minutes + secs, text), text), text
    )
    fraction = m.group(7)
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    if m.group(6) is not None and m.group(6).startswith("-"):
        nanos = -nanos
    total_ns = total * _NANOS_PER_S + nanos
    if m.group(1) == "-":
        total_ns = -total_ns
    _checked_long(total_ns // _NANOS_PER_S, text)  # Duration seconds must fit a long
    return total_ns


def parse_duration(text: str) -> int:
    """Milliseconds of an ISO-8601 duration: ``Duration.parse(text).toMillis()``.

    ``toMillis`` truncates toward zero (PT0.0005S is 0, PT-0.0015S is -1) and
    fails when the milliseconds overflow a long.
    """
    ns = parse_duration_nanos(text)
    ms = ns // NANOS_PER_MS if ns >= 0 else -((-ns) // NANOS_PER_MS)
    if not _LONG_MIN <= ms <= _LONG_MAX:
        raise InvalidInputError(f"invalid duration {text!r}: overflow in milliseconds")
    return ms


_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]*))?(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?",
    re.ASCII,
)


def parse_datetime(text: str, default_tz: tzinfo) -> int:
    """Epoch milliseconds of a ``--to-datetime`` value ``YYYY-MM-DDTHH:mm:SS.sss[zone]``.

    Tool fact (``Utils.getDateTime``, used by 3.7 ``prepareOffsetsToReset`` and
    4.x ``GroupOffsetsResetter.resetToDateTime``): if the part after 'T' has no
    '+', '-' or 'Z', the tool appends "Z" -- **a value without a zone is UTC**,
    not the JVM's local time. So pass ``UTC`` as ``default_tz`` for
    parity; another zone is an explicit opskit choice. Zones accepted: ``Z``,
    ``+HH:MM`` (pattern ``...SSSXXX``), ``+HH`` (fallback pattern ``...SSSX``).
    Non-lenient ``SimpleDateFormat``, so Feb 30 or 24:00 are errors.

    Where the tool silently misreads, opskit refuses instead:
    ``+0530`` (the X fallback reads only "+05" and ignores "30"; ``+HH00`` is
    accepted since it means the same), fractions that are not exactly three
    digits (the tool reads ``.5`` as 5 ms), and instants before 1970 (a
    negative timestamp in ListOffsets means LATEST/EARLIEST/... to the broker).
    A local time that falls in a DST gap or overlap of ``default_tz`` is refused.
    """
    m = _DATETIME.fullmatch(text.strip())
    if m is None:
        raise InvalidInputError(
            f"invalid datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss with an optional "
            "zone Z, +HH:MM or +HH (e.g. 2024-05-01T12:00:00.000Z)"
        )
    fraction, zone = m.group(7), m.group(8)
    if fraction is None or len(fraction) != 3:
        raise InvalidInputError(
            f"invalid datetime {text!r}: give exactly three millisecond digits after the seconds "
            "(e.g. 12:00:00.000; kafka-consumer-groups reads '.5' as 5 ms)"
        )
    tz: tzinfo
    if zone is None:
        tz = default_tz
    elif zone == "Z":
        tz = UTC
    else:
        digits = zone[1:].replace(":", "")
        hh, mm = int(digits[:2]), int(digits[2:] or "0")
        if ":" not in zone and len(digits) == 4 and mm != 0:
            raise InvalidInputError(
                f"invalid datetime {text!r}: write the offset as {zone[:3]}:{digits[2:]} "
                f"(kafka-consumer-groups reads {zone} as {zone[:3]}:00)"
            )
        if hh > 23 or mm > 59:
            raise InvalidInputError(f"invalid datetime {text!r}: zone offset {zone} out of range")
        offset = timedelta(hours=hh, minutes=mm)
        tz = timezone(-offset if zone[0] == "-" else offset)
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    try:
        when = datetime(year, month, day, hour, minute, second, int(fraction) * 1000, tzinfo=tz)
    except ValueError as exc:
        raise InvalidInputError(f"invalid datetime {text!r}: {exc}") from None
    if zone is None:
        _check_local_time_exists(when, text, default_tz)
    millis = (when - _EPOCH) // timedelta(milliseconds=1)
    if millis < 0:
        raise InvalidInputError(f"invalid datetime {text!r}: before 1970-01-01T00:00:00Z")
    return millis


def _check_local_time_exists(when: datetime, text: str, zone: tzinfo) -> None:
    first, second = when.replace(fold=0), when.replace(fold=1)
    if first.utcoffset() == second.utcoffset():
        return
    wall = first.replace(tzinfo=None)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        raise InvalidInputError(
            f"datetime {text!r} does not exist in {zone} (clocks skip it); give an explicit offset"
        )
    raise InvalidInputError(
        f"datetime {text!r} is ambiguous in {zone} (clocks pass it twice); give an explicit offset"
    )


def format_ms(millis: int) -> str:
    """Epoch milliseconds as ``YYYY-MM-DDTHH:mm:SS.sssZ`` (the tool's input format, in UTC)."""
    when = _EPOCH + timedelta(milliseconds=millis)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
