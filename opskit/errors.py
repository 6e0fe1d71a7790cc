"""The one error tree of opskit.

Every failure the user can cause or meet is one of these classes. The CLI maps
them to exit codes in exactly one place (``opskit.cli.exits``); library code
never exits and never prints.
"""

from __future__ import annotations


class OpskitError(Exception):
    """Base class. ``str(err)`` is the one-line message shown to the user."""

    #: short machine-readable kind, used in JSON errors and exporter self-metrics
    kind = "error"


class UsageError(OpskitError):
    """Bad flags or flag combinations."""

    kind = "usage"


class InvalidInputError(OpskitError):
    """A file or value the user gave is malformed (YAML, CSV, backup, snapshot)."""

    kind = "invalid_input"


class ConfigError(InvalidInputError):
    """The opskit config file or a context in it is unusable."""

    kind = "config"


class WriteFailedError(OpskitError):
    """A file opskit writes could not be written (disk full, permission denied,
    read-only file system); the previous file, if any, is unchanged."""

    kind = "write_failed"


class NotFoundError(OpskitError):
    """A named thing does not exist: group, topic, context, sandbox, backup."""

    kind = "not_found"


class ServiceUnavailableError(OpskitError):
    """A service opskit talks to (Kafka, PagerDuty, a Spark master) could not be
    reached or did not answer within the timeout."""

    kind = "unreachable"


class KafkaUnavailableError(ServiceUnavailableError):
    """The cluster could not be reached or did not answer within the timeout."""


class AuthenticationError(OpskitError):
    """The cluster refused opskit's credentials or TLS could not be set up: wrong
    password or unknown user, a SASL mechanism the listener lacks, a certificate
    that does not verify, TLS spoken to a plaintext port or the reverse. The
    message names the cause; never the secret."""

    kind = "authentication"


class UnsupportedError(OpskitError):
    """The broker lacks an API or feature the command needs."""

    kind = "unsupported"


class KafkaOperationError(OpskitError):
    """The broker answered with an error to a request opskit made."""

    kind = "kafka_error"


class NotAuthorisedError(KafkaOperationError):
    """The broker refused a request because the principal lacks an ACL (authorisation,
    not authentication). Optional reads catch it and degrade with a note."""

    kind = "not_authorised"


class InvisibleError(OpskitError):
    """What was asked for is not visible to the principal (an ACL is missing), so the answer
    is UNKNOWN: never a silent ``OK`` over nothing. The message names the ACL."""

    kind = "invisible"


class IncompleteError(OpskitError):
    """Part of what was asked could not be read or verified (a log end the broker would
    not give, a list of groups it would not make): the output says which part, and the
    answer as a whole is UNKNOWN, never OK. The message names the broker and the API
    when one is to blame."""

    kind = "incomplete"


class RefusedError(OpskitError):
    """A mutation was refused because it is unsafe now (active group, moved offsets...)."""

    kind = "refused"


class SandboxError(OpskitError):
    """The local sandbox cluster could not be set up (no Java/Maven, port taken...)."""

    kind = "sandbox"


class InconsistentStateError(OpskitError):
    """The broker's answers contradict each other in a way that makes the result unsafe."""

    kind = "inconsistent"
