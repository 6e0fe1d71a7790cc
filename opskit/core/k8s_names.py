"""Kubernetes object names (pure): what the API server would accept, checked before
anything is generated or sent.

Kubernetes has two kinds of names: a DNS label (RFC 1123: lower-case letters,
digits and '-', starting and ending with a letter or digit, at most 63 characters:
namespaces, and names that become host names or Services) and a DNS subdomain
(labels joined by '.', at most 253 characters: Secrets, ConfigMaps, service
accounts). ``fullmatch`` is used on purpose: ``re.match`` with ``$`` accepts a
trailing newline (``'kafka\\n'`` passed that way once).
"""

from __future__ import annotations

import re

MAX_LABEL = 63
MAX_SUBDOMAIN = 253

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def dns_label_problem(value: str, max_len: int = MAX_LABEL) -> str | None:
    """Why ``value`` is not a DNS label of at most ``max_len`` characters (None: it is)."""
    if _LABEL.fullmatch(value) is None:
        return ("is not a Kubernetes name (a DNS label: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit)")
    if len(value) > max_len:
        return f"is not a Kubernetes name: longer than {max_len} characters"
    return None


def dns_subdomain_problem(value: str, max_len: int = MAX_SUBDOMAIN) -> str | None:
    """Why ``value`` is not a DNS subdomain of at most ``max_len`` characters (None: it is)."""
    if _SUBDOMAIN.fullmatch(value) is None:
        return ("is not a Kubernetes name (a DNS subdomain: lower-case letters, digits, '-' "
                "and '.', each part starting and ending with a letter or digit)")
    if len(value) > max_len:
        return f"is not a Kubernetes name: longer than {max_len} characters"
    return None
