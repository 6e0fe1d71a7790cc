"""The metric names a PromQL expression selects (pure): what the rules and dashboards
tests compare with the metrics the exporter serves."""

from __future__ import annotations

import re

_PROMQL_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "inf", "nan", "atan2",
}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"(?<![\w:.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")


def promql_metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (functions, keywords and label names dropped).

    Grafana variables (``$topic``) and ``$__rate_interval`` are ignored.
    """
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub("", text)
    text = re.sub(r"\$\{?\w+\}?", "", text)
    names: set[str] = set()
    for m in _IDENT.finditer(text):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in _PROMQL_KEYWORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]", word):
            continue
        names.add(word)
    return names
