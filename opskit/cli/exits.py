"""Exit codes: the one place where errors become process exit statuses.

| code | meaning |
|------|---------|
| 0    | OK / success |
| 1    | WARNING threshold crossed |
| 2    | CRITICAL threshold crossed; also usage errors and malformed input (the message says which) |
| 3    | UNKNOWN: Kafka unreachable or timed out (nothing answered), the broker lacks, closes the connection on or answers unparseably a needed API, part of the answer could not be read or verified (the output says which), a component is not installed (Java, Maven, pyspark: the line names the install step), or the principal cannot see what was asked (missing Describe ACL) |
| 4    | not found: unknown group, topic, context, sandbox or file |
| 5    | refused: an unsafe mutation was refused (active group, offsets moved, ...) |
| 6    | Kafka rejected a request (authorisation, invalid config, ...) |
| 7    | sandbox could not be set up (port taken, Kafka did not start, ...) |
| 8    | a file could not be written (disk full, permission denied, ...); nothing was replaced; or stdout is closed or broken |
| 9    | authentication or TLS failure (wrong password or user, SASL mechanism not enabled, certificate not verified, TLS/plaintext mismatch) |
| 70   | internal error (a bug: rerun with --debug and report it) |
| 130  | interrupted |
"""

from __future__ import annotations

from opskit import errors

OK = 0
WARNING = 1
CRITICAL = 2
USAGE = 2
UNKNOWN = 3
NOT_FOUND = 4
REFUSED = 5
KAFKA_ERROR = 6
SANDBOX = 7
WRITE_FAILED = 8
AUTH = 9
INTERNAL = 70
INTERRUPTED = 130

_BY_CLASS: list[tuple[type[errors.OpskitError], int]] = [
    (errors.UsageError, USAGE),
    (errors.InvalidInputError, USAGE),
    (errors.NotFoundError, NOT_FOUND),
    (errors.ServiceUnavailableError, UNKNOWN),
    (errors.UnsupportedError, UNKNOWN),
    (errors.InconsistentStateError, UNKNOWN),
    (errors.InvisibleError, UNKNOWN),
    (errors.IncompleteError, UNKNOWN),
    (errors.RefusedError, REFUSED),
    (errors.KafkaOperationError, KAFKA_ERROR),
    (errors.SandboxError, SANDBOX),
    (errors.WriteFailedError, WRITE_FAILED),
    (errors.AuthenticationError, AUTH),
]


#: every exit status opskit can end with, the table above without 70 (the CLI fuzz
#: test asserts nothing else occurs)
DOCUMENTED = frozenset({OK, WARNING, CRITICAL, UNKNOWN, INTERRUPTED}
                       | {code for _, code in _BY_CLASS})


def exit_code_for(err: errors.OpskitError) -> int:
    for cls, code in _BY_CLASS:
        if isinstance(err, cls):
            return code
    return INTERNAL
