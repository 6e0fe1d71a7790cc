"""``--command-config FILE``: a Kafka client properties file, the one Kafka's own tools
take (``kafka-consumer-groups.sh --command-config``), read into opskit's connection.

The file is read and checked once, when the option is parsed: a malformed file or a
setting opskit cannot honour is one line (exit 2); the properties opskit does not use
are returned so that the CLI names them in one warning. The password and the truststore
password are registered with :mod:`opskit.redact` as soon as they are read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from opskit import redact
from opskit.adapters.files.safe_read import MAX_SECRET_BYTES, read_text
from opskit.core.client_properties import ClientSettings, client_settings, parse_properties
from opskit.core.connection import ConnectionConfig
from opskit.errors import InvalidInputError, UsageError


@dataclass(frozen=True)
class CommandConfig:
    """A properties file, read and checked."""

    path: str
    settings: ClientSettings

    @property
    def source(self) -> str:
        return f"--command-config {self.path}"

    def connection(self, bootstrap: str | None = None) -> ConnectionConfig:
        """The connection the file describes; ``bootstrap`` (``--bootstrap-server``, or
        ``$KAFKA_BOOTSTRAP_SERVERS`` when the file names none) wins over the file's
        ``bootstrap.servers``."""
        s = self.settings
        servers = bootstrap or s.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None
        if not servers:
            raise UsageError(f"{self.source} has no bootstrap.servers: give --bootstrap-server")
        conn = ConnectionConfig(
            bootstrap=servers, client_id=s.client_id or "opskit",
            security_protocol=s.security_protocol, sasl_mechanism=s.sasl_mechanism,
            username=s.username, password=s.password,
            ca_file=self._ca_file(), verify_hostname=s.verify_hostname, source=self.source)
        errs = conn.validate()
        if errs:
            raise UsageError(f"{self.source}: {errs[0]}")
        return conn

    def _ca_file(self) -> str | None:
        loc = self.settings.truststore_location
        # a relative path is relative to the working directory, as for Kafka's tools
        return os.path.abspath(loc) if loc is not None else None


#: the ``--command-config`` of the running command (set when the option is parsed)
_current: CommandConfig | None = None


def use(config: CommandConfig | None) -> None:
    """Make ``config`` the connection of this run (None: the contexts decide)."""
    global _current
    _current = config


def current() -> CommandConfig | None:
    return _current


def load_command_config(path: str | Path) -> CommandConfig:
    """Read and check ``path``; InvalidInputError (exit 2) when it is malformed or asks for
    something opskit cannot do, NotFoundError (exit 4) when it does not exist."""
    p = str(path)
    what = "--command-config file"
    # a properties file is small; a large one is the wrong file
    text = read_text(p, what, max_bytes=16 * MAX_SECRET_BYTES)
    try:
        settings = client_settings(parse_properties(text))
    except ValueError as e:
        raise InvalidInputError(f"{what} {p}: {e}") from None
    for secret in settings.secrets():
        redact.register(secret)
    config = CommandConfig(p, settings)
    ca = config._ca_file()
    if ca is not None and not Path(ca).is_file():
        raise InvalidInputError(f"{what} {p}: ssl.truststore.location {ca} is not a file")
    return config
