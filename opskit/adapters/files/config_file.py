"""The opskit config file (``~/.config/opskit/config.yaml``): contexts and thresholds.

Format::

    current-context: prod
    contexts:
      prod:
        bootstrap: kafka-0.kafka:9092
        client_id: opskit
        security:
          protocol: SASL_SSL          # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
          sasl_mechanism: SCRAM-SHA-512
          username: opskit
          password_file: /var/run/secrets/kafka/password   # or password: ...
          ca: /etc/kafka/ca.pem
          cert: /etc/kafka/client.pem
          key: /etc/kafka/client.key
    thresholds:
      default: {lag_warn: 100000, lag_crit: 1000000}
      groups:
        billing-agg: {lag_warn: 10000, lag_crit: 100000}

A context may instead name a Kafka client properties file (``opskit context import``)::

      prod-admin:
        bootstrap: kafka-0.kafka:9093
        command_config: /etc/kafka/admin.properties   # security.protocol, sasl.*, ssl.*

Connection precedence: ``--command-config FILE`` (with ``--bootstrap-server`` or the
file's ``bootstrap.servers``) > ``--bootstrap-server`` > ``--context`` >
``$KAFKA_BOOTSTRAP_SERVERS`` > ``$OPSKIT_CONTEXT`` > ``current-context``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opskit import redact
from opskit.adapters.files.safe_read import parse_yaml, read_secret, read_text
from opskit.adapters.files.safe_write import write_file
from opskit.core.connection import ConnectionConfig
from opskit.core.models import LagThresholds
from opskit.errors import ConfigError, InvalidInputError, NotFoundError, UsageError
from opskit.paths import config_file


@dataclass
class OpskitConfig:
    path: Path
    current_context: str | None = None
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None) -> OpskitConfig:
        p = path or config_file()
        if not p.exists():
            return cls(path=p)
        try:  # yaml is imported only when there is a file to read
            data = parse_yaml(read_text(p, "config file"), f"config file {p}") or {}
        except InvalidInputError as e:
            raise ConfigError(str(e)) from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {p} must be a mapping at the top level")
        contexts = data.get("contexts") or {}
        if not isinstance(contexts, dict) or not all(isinstance(v, dict) for v in contexts.values()):
            raise ConfigError(f"config file {p}: 'contexts' must map names to mappings")
        for name, entry in contexts.items():
            if not isinstance(name, str):
                raise ConfigError(f"config file {p}: context name {name!r} is not text")
            for key in ("bootstrap", "security"):
                want = str if key == "bootstrap" else dict
                if entry.get(key) is not None and not isinstance(entry[key], want):
                    raise ConfigError(f"config file {p}: context {name!r}: {key!r} must be "
                                      f"{'text' if want is str else 'a mapping'}")
        current = data.get("current-context")
        if current is not None and not isinstance(current, str):
            raise ConfigError(f"config file {p}: 'current-context' must be a context name")
        thresholds = data.get("thresholds") or {}
        if not isinstance(thresholds, dict):
            raise ConfigError(f"config file {p}: 'thresholds' must be a mapping")
        cfg = cls(path=p, current_context=data.get("current-context"), contexts=contexts,
                  thresholds=thresholds, raw=data)
        cfg.check_thresholds()
        return cfg

    def save(self) -> None:
        data = dict(self.raw)
        data["current-context"] = self.current_context
        data["contexts"] = self.contexts
        if self.thresholds:
            data["thresholds"] = self.thresholds
        import yaml

        write_file(self.path, yaml.safe_dump(data, sort_keys=False), what="config file",
                   mode=0o600)

    # ----- contexts -----
    def context(self, name: str) -> ConnectionConfig:
        if name not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise NotFoundError(f"unknown context {name!r} (known: {known})")
        return context_to_connection(name, self.contexts[name])

    def set_context(self, name: str, bootstrap: str, client_id: str = "opskit",
                    security: dict[str, Any] | None = None) -> None:
        entry: dict[str, Any] = {"bootstrap": bootstrap, "client_id": client_id}
        if security:
            entry["security"] = security
        context_to_connection(name, entry)  # validate before writing
        self.contexts[name] = entry

    # ----- thresholds -----
    def lag_thresholds(self, group: str) -> LagThresholds:
        d = self.thresholds.get("default") or {}
        groups = self.thresholds.get("groups") or {}
        if not isinstance(d, dict) or not isinstance(groups, dict):
            raise ConfigError(f"config file {self.path}: thresholds.default and "
                              "thresholds.groups must be mappings")
        g = groups.get(group) or {}
        if not isinstance(g, dict):
            raise ConfigError(f"config file {self.path}: thresholds for {group!r} must be a mapping")
        which = "thresholds.default" if group == "" else f"thresholds for group {group!r}"
        where = f"config file {self.path}: {which}"
        warn = _count(where, "lag_warn", g.get("lag_warn", d.get("lag_warn", 100_000)))
        crit = _count(where, "lag_crit", g.get("lag_crit", d.get("lag_crit", 1_000_000)))
        try:
            return LagThresholds(warn=warn, crit=crit)
        except ValueError as e:
            raise ConfigError(f"{where}: {e}") from None

    def check_thresholds(self) -> None:
        """ConfigError unless the default and every group's thresholds are usable
        (checked when the file is loaded, so a long-running exporter cannot meet a
        bad value later)."""
        self.lag_thresholds("")
        groups = self.thresholds.get("groups") or {}
        for group in groups if isinstance(groups, dict) else ():
            self.lag_thresholds(str(group))


#: the largest threshold accepted (a signed 64-bit offset difference)
_MAX_COUNT = 2**63 - 1


def _count(where: str, key: str, value: Any) -> int:
    """A threshold in messages: a whole number from 0 to 2^63-1."""
    n: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() \
            and len(value.strip()) <= 19:
        n = int(value.strip())
    if n is None or not 0 <= n <= _MAX_COUNT:
        raise ConfigError(f"{where}: {key} must be a whole number from 0 to 2^63-1, "
                          f"not {str(value)[:40]!r}")
    return n


def context_to_connection(name: str, entry: dict[str, Any]) -> ConnectionConfig:
    if entry.get("command_config") is not None:
        return _properties_context(name, entry)
    sec = entry.get("security") or {}
    if not isinstance(sec, dict):
        raise ConfigError(f"context {name!r}: 'security' must be a mapping")
    for key in ("sasl_mechanism", "username", "password", "password_file", "ca", "cert", "key"):
        if sec.get(key) is not None and not isinstance(sec[key], str):
            raise ConfigError(f"context {name!r}: security.{key} must be a string")
    password = sec.get("password")
    redact.register(password)  # masked in every log record from now on
    pw_file = sec.get("password_file")
    if pw_file:
        try:
            password = read_secret(str(pw_file), "password_file")
        except InvalidInputError as e:
            raise ConfigError(f"context {name!r}: {e}") from None
    bootstrap = entry.get("bootstrap")
    if not isinstance(bootstrap, str):
        raise ConfigError(f"context {name!r} has no 'bootstrap' string")
    conn = ConnectionConfig(
        bootstrap=bootstrap,
        client_id=str(entry.get("client_id", "opskit")),
        security_protocol=str(sec.get("protocol", "PLAINTEXT")),
        sasl_mechanism=sec.get("sasl_mechanism"),
        username=sec.get("username"),
        password=password,
        ca_file=sec.get("ca"),
        cert_file=sec.get("cert"),
        key_file=sec.get("key"),
        source=f"context {name}",
    )
    errs = conn.validate()
    if errs:
        raise ConfigError(f"context {name!r}: {errs[0]}")
    return conn


def _properties_context(name: str, entry: dict[str, Any]) -> ConnectionConfig:
    """A context that names a Kafka client properties file for its security settings."""
    from dataclasses import replace

    from opskit.adapters.files.command_config import load_command_config

    path, bootstrap = entry.get("command_config"), entry.get("bootstrap")
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"context {name!r}: command_config must be a file name")
    if bootstrap is not None and not isinstance(bootstrap, str):
        raise ConfigError(f"context {name!r}: 'bootstrap' must be a string")
    if entry.get("security") is not None:
        raise ConfigError(f"context {name!r}: give 'security' or 'command_config', not both")
    try:
        conn = load_command_config(path).connection(bootstrap)
    except (InvalidInputError, UsageError) as e:
        raise ConfigError(f"context {name!r}: {e}") from None
    return replace(conn, client_id=str(entry.get("client_id", conn.client_id)),
                   source=f"context {name}")


def resolve_connection(
    bootstrap: str | None, context: str | None, cfg: OpskitConfig | None = None,
    *, allow_http: bool = False,
) -> ConnectionConfig:
    """Apply the precedence rules and return a validated connection.

    A bootstrap of ``http://`` URLs names a StreamNest cluster (HTTP only): refused with
    one line saying why (UnsupportedError, exit 3) unless ``allow_http`` (the commands
    that support StreamNest), which returns it unvalidated for
    :func:`opskit.adapters.http.streamnest.parse_endpoints`."""
    # an empty value is a mistake (an unset variable in a script), never "use the
    # current context": that could act on another cluster
    if bootstrap is not None and not bootstrap.strip():
        raise UsageError("--bootstrap-server is empty")
    if context is not None and not context.strip():
        raise UsageError("--context is empty")
    from opskit.adapters.files import command_config
    properties = command_config.current()
    if properties is not None:
        if context is not None:
            raise UsageError("give --context or --command-config, not both")
        return properties.connection(bootstrap)
    cfg = cfg or OpskitConfig.load()
    if bootstrap is not None:
        conn = ConnectionConfig(bootstrap=bootstrap, source="--bootstrap-server")
    elif context is not None:
        conn = cfg.context(context)
    elif os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        conn = ConnectionConfig(bootstrap=os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                                source="KAFKA_BOOTSTRAP_SERVERS")
    elif os.environ.get("OPSKIT_CONTEXT"):
        conn = cfg.context(os.environ["OPSKIT_CONTEXT"])
    elif cfg.current_context:
        conn = cfg.context(cfg.current_context)
    else:
        raise UsageError(
            "no cluster given: use --bootstrap-server, --context, $KAFKA_BOOTSTRAP_SERVERS "
            "or 'opskit context use NAME'"
        )
    if "http" in conn.bootstrap.lower():  # (the HTTP client is imported only for one)
        from opskit.adapters.http import streamnest

        if streamnest.is_http_bootstrap(conn.bootstrap):
            if allow_http:
                return conn
            raise streamnest.not_applicable(conn.bootstrap)
    errs = conn.validate()
    if errs:
        raise UsageError(f"{conn.source}: {errs[0]}")
    return conn
