"""How to reach a cluster: bootstrap, client id and security settings (pure)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, fields, replace
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _host_ok(host: str) -> bool:
    """A host name, an IPv4 address or a bracketed IPv6 address (``[::1]``)."""
    if host.startswith("[") or host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1] if host.startswith("[") and host.endswith("]")
                                  else "-")
        except ValueError:
            return False
        return True
    return not any(c in host for c in ":[]/@")


@dataclass(frozen=True)
class ConnectionConfig:
    bootstrap: str
    client_id: str = "opskit"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    #: TLS: check that the broker's certificate names the host connected to (Kafka's
    #: ``ssl.endpoint.identification.algorithm=https``, the default); False when a
    #: properties file sets it empty
    verify_hostname: bool = True
    #: where the settings came from: flag, env, or context name (for messages)
    source: str = "flag"

    def validate(self) -> list[str]:
        """Problems with this config, as one-line messages (empty when usable)."""
        errs: list[str] = []
        if not self.bootstrap.strip():
            errs.append("bootstrap servers are empty")
        for hp in self.bootstrap.split(","):
            host, _, port = hp.strip().rpartition(":")
            if (not host or not port.isascii() or not port.isdigit() or len(port) > 5
                    or not 0 < int(port) < 65536
                    or not all(c.isascii() and c.isprintable() and not c.isspace()
                               for c in host)):
                errs.append(f"bootstrap server {hp.strip()!r} is not host:port")
            elif not _host_ok(host):
                errs.append(f"bootstrap server {hp.strip()!r} is not host:port (an IPv6 "
                            "address goes in brackets: [::1]:9092)")
        proto = self.security_protocol.upper()
        if proto not in PROTOCOLS:
            errs.append(f"security protocol {self.security_protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.sasl_mechanism is not None and self.sasl_mechanism.upper() not in MECHANISMS:
            errs.append(f"SASL mechanism {self.sasl_mechanism!r} is not one of {', '.join(MECHANISMS)}")
        if proto.startswith("SASL"):
            if self.sasl_mechanism is None:
                errs.append(f"SASL needs a mechanism, one of {', '.join(MECHANISMS)}")
            if not self.username or self.password is None:
                errs.append("SASL needs a username and a password (or password_file)")
        if bool(self.cert_file) != bool(self.key_file):
            errs.append("a TLS client certificate needs both cert and key")
        return errs

    def to_librdkafka(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol.upper(),
        }
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism.upper()
        if self.username is not None:
            conf["sasl.username"] = self.username
        if self.password is not None:
            conf["sasl.password"] = self.password
        if self.ca_file:
            conf["ssl.ca.location"] = self.ca_file
        if self.cert_file:
            conf["ssl.certificate.location"] = self.cert_file
        if self.key_file:
            conf["ssl.key.location"] = self.key_file
        if not self.verify_hostname:
            conf["ssl.endpoint.identification.algorithm"] = "none"
        return conf

    def to_kafka_python(self, timeout_ms: int) -> dict[str, Any]:
        """The same settings for kafka-python (used only for APIs confluent-kafka lacks)."""
        conf: dict[str, Any] = {
            "bootstrap_servers": [h.strip() for h in self.bootstrap.split(",") if h.strip()],
            "client_id": self.client_id,
            "security_protocol": self.security_protocol.upper(),
            "request_timeout_ms": timeout_ms,
        }
        if self.sasl_mechanism:
            conf["sasl_mechanism"] = self.sasl_mechanism.upper()
        if self.username is not None:
            conf["sasl_plain_username"] = self.username
        if self.password is not None:
            conf["sasl_plain_password"] = self.password
        if self.ca_file:
            conf["ssl_cafile"] = self.ca_file
        if self.cert_file:
            conf["ssl_certfile"] = self.cert_file
        if self.key_file:
            conf["ssl_keyfile"] = self.key_file
        if not self.verify_hostname:
            conf["ssl_check_hostname"] = False
        return conf

    @property
    def principal(self) -> str:
        """The Kafka principal this connection logs in as, for messages naming an ACL."""
        if self.security_protocol.upper().startswith("SASL") and self.username:
            return f"User:{self.username}"
        if self.cert_file:
            return "the client certificate's principal"
        return "User:ANONYMOUS"

    def masked(self) -> dict[str, Any]:
        """For display: every field, the password replaced by asterisks."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if out.get("password") is not None:
            out["password"] = "********"
        return out

    def with_client_id(self, client_id: str) -> ConnectionConfig:
        return replace(self, client_id=client_id)
