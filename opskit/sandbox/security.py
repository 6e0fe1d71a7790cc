"""Security for a sandbox cluster: TLS material, SASL users, the authorizer.

``opskit sandbox up --security sasl_ssl`` (or ``sasl_plaintext``) gives the
sandbox HIP-30's production shape on its client listener:

* a client listener ``CLIENT`` speaking SASL_SSL (TLS 1.3, a broker certificate
  for ``127.0.0.1`` / ``localhost`` signed by a CA generated for this sandbox) or
  SASL_PLAINTEXT, with the mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512;
* every principal known with the same generated password for each mechanism:
  PLAIN users in the listener's JAAS section, SCRAM credentials (both hashes)
  written into the metadata log when the node is formatted
  (``kafka-storage format --add-scram``, KRaft);
* ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false`` and
  ``admin`` as the super user: every other principal (``monitor`` and HIP-30's
  services) can do nothing until ACLs grant it;
* inter-broker traffic over the same client listener as ``admin`` with PLAIN
  (over TLS with SASL_SSL).

Limit, said plainly: the KRaft controller listener stays PLAINTEXT on
127.0.0.1 and its unauthenticated principal ``User:ANONYMOUS`` is a super user
(the brokers reach the controller as that principal). Anything that can open a
loopback connection to the controller port can change the cluster's metadata.

Secrets: passwords are random, one file per principal (mode 0600) in
``<sandbox>/secrets/``; keys are 0600 too. They reach Kafka only through files
(``server.properties``, 0600, and a java argument file for the format step),
never a command line.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from opskit import redact
from opskit.core.connection import ConnectionConfig
from opskit.errors import SandboxError, UsageError

#: security modes of a sandbox (``--security``)
MODES = ("plaintext", "sasl_plaintext", "sasl_ssl")
#: the mechanisms the client listener enables
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ADMIN = "admin"
MONITOR = "monitor"
#: HIP-30's service principals (its Security section)
HIP30_PRINCIPALS = ("insights-capture", "llm-gateway", "iam-service", "analytics-ingest",
                    "billing-aggregator", "audit-archiver")
PRINCIPALS = (ADMIN, MONITOR, *HIP30_PRINCIPALS)
CLIENT_LISTENER = "CLIENT"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def validate_mode(mode: str) -> str:
    m = mode.strip().lower()
    if m not in MODES:
        raise UsageError(f"--security must be one of {', '.join(MODES)}, not {mode!r}")
    return m


def protocol(mode: str) -> str:
    """The client listener's security protocol (``SASL_SSL``...)."""
    return mode.upper()


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file readable by its owner only (created 0600, never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def validate_mechanisms(mechanisms: str) -> tuple[str, ...]:
    """``--sasl-mechanisms``: a comma-separated subset of MECHANISMS holding PLAIN (the
    brokers log in to each other with it)."""
    chosen = tuple(dict.fromkeys(m.strip().upper() for m in mechanisms.split(",") if m.strip()))
    bad = [m for m in chosen if m not in MECHANISMS]
    if bad or "PLAIN" not in chosen:
        raise UsageError(f"--sasl-mechanisms must list PLAIN and any of {', '.join(MECHANISMS[1:])}"
                         f", not {mechanisms!r}")
    return chosen


@dataclass(frozen=True)
class SandboxSecurity:
    """The security material of one sandbox, kept under ``<root>/secrets``."""

    mode: str
    root: Path
    #: the mechanisms the client listener enables (all three unless chosen otherwise)
    mechanisms: tuple[str, ...] = MECHANISMS

    @property
    def enabled(self) -> bool:
        return self.mode != "plaintext"

    @property
    def tls(self) -> bool:
        return self.mode == "sasl_ssl"

    @property
    def dir(self) -> Path:
        return self.root / "secrets"

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def keystore_file(self) -> Path:
        return self.dir / "broker-keystore.pem"

    def password_file(self, user: str) -> Path:
        if user not in PRINCIPALS:
            raise UsageError(f"the sandbox has no principal {user!r} (known: {', '.join(PRINCIPALS)})")
        return self.dir / f"{user}.password"

    def password(self, user: str) -> str:
        try:
            pw = self.password_file(user).read_text().strip()
        except OSError as e:
            raise SandboxError(f"cannot read the sandbox password of {user}: {e.strerror}") from e
        redact.register(pw)
        return pw

    # ----- creation -----
    def create(self) -> None:
        """Generate passwords (and, with TLS, the CA and broker certificate) once."""
        if not self.enabled:
            return
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        for user in PRINCIPALS:
            pf = self.password_file(user)
            if not pf.exists():
                # hex: safe inside JAAS quotes and --add-scram's [name=..,password=..]
                _write_private(pf, secrets.token_hex(16) + "\n")
        if self.tls and not self.keystore_file.exists():
            self._generate_tls()

    def _openssl(self, *args: str) -> None:
        try:
            proc = subprocess.run(["openssl", *args], check=False, cwd=self.dir, capture_output=True,
                                  text=True, timeout=60, umask=0o077)
        except FileNotFoundError as e:
            raise SandboxError("openssl is not installed (needed for --security sasl_ssl)") from e
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()
            raise SandboxError(f"openssl {args[0]} failed: {last[-1] if last else '?'}")

    def _generate_tls(self) -> None:
        """A CA, and a broker certificate for 127.0.0.1 / localhost signed by it."""
        d = self.dir
        self._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                      "-out", "ca.pem", "-days", "3650", "-subj", "/CN=opskit sandbox CA",
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        (d / "broker.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth,clientAuth\n")
        self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
                      "-out", "broker.csr", "-subj", "/CN=localhost")
        self._openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                      "-CAcreateserial", "-out", "broker.crt", "-days", "825",
                      "-extfile", "broker.ext")
        # Kafka's PEM key store: the (PKCS#8, unencrypted) key, then the certificate chain
        _write_private(self.keystore_file, (d / "broker.key").read_text()
                       + (d / "broker.crt").read_text() + (d / "ca.pem").read_text())
        for f in ("broker.csr", "broker.ext", "ca.srl"):
            (d / f).unlink(missing_ok=True)
        for f in ("ca.key", "broker.key", "broker.crt", "ca.pem"):
            os.chmod(d / f, 0o600 if f.endswith(".key") else 0o644)

    # ----- broker configuration -----
    def listener_map(self) -> str:
        return f"{CLIENT_LISTENER}:{protocol(self.mode)},CONTROLLER:PLAINTEXT"

    def broker_properties(self) -> list[str]:
        """The lines a node's ``server.properties`` gets for this mode (secrets inside:
        the file is written 0600)."""
        lst = CLIENT_LISTENER.lower()
        admin_pw = self.password(ADMIN)
        users = " ".join(f'user_{u}="{self.password(u)}"' for u in PRINCIPALS)
        lines = [
            f"listener.security.protocol.map={self.listener_map()}",
            f"inter.broker.listener.name={CLIENT_LISTENER}",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.{lst}.sasl.enabled.mechanisms={','.join(self.mechanisms)}",
            (f"listener.name.{lst}.plain.sasl.jaas.config="
             "org.apache.kafka.common.security.plain.PlainLoginModule required "
             f'username="{ADMIN}" password="{admin_pw}" {users};'),
            *(f"listener.name.{lst}.{m.lower()}.sasl.jaas.config="
              "org.apache.kafka.common.security.scram.ScramLoginModule required;"
              for m in self.mechanisms if m != "PLAIN"),
            f"authorizer.class.name={AUTHORIZER}",
            "allow.everyone.if.no.acl.found=false",
            # ANONYMOUS: the brokers' connections to the PLAINTEXT controller listener
            f"super.users=User:{ADMIN};User:ANONYMOUS",
        ]
        if self.tls:
            lines += [
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={self.keystore_file}",
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={self.ca_file}",
                "ssl.enabled.protocols=TLSv1.3",
                "ssl.protocol=TLSv1.3",
            ]
        return lines

    def scram_format_args(self) -> list[str]:
        """``--add-scram`` arguments for ``kafka-storage format`` (into an argument
        file, never onto a command line: they hold the passwords)."""
        out: list[str] = []
        for user in PRINCIPALS:
            pw = self.password(user)
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                out += ["--add-scram", f"{mech}=[name={user},password={pw}]"]
        return out

    # ----- clients -----
    def connection(self, bootstrap: str, user: str = ADMIN, mechanism: str = "PLAIN",
                   client_id: str = "opskit") -> ConnectionConfig:
        """How a client logs in as ``user`` (the password read from its file)."""
        if not self.enabled:
            return ConnectionConfig(bootstrap, client_id=client_id)
        return ConnectionConfig(
            bootstrap, client_id=client_id, security_protocol=protocol(self.mode),
            sasl_mechanism=mechanism, username=user, password=self.password(user),
            ca_file=str(self.ca_file) if self.tls else None, source=f"sandbox user {user}")

    def context_security(self, user: str, mechanism: str = "PLAIN") -> dict[str, str]:
        """The ``security`` block of an opskit context for ``user`` (a password_file,
        never the password)."""
        sec = {"protocol": protocol(self.mode), "sasl_mechanism": mechanism, "username": user,
               "password_file": str(self.password_file(user))}
        if self.tls:
            sec["ca"] = str(self.ca_file)
        return sec


def admin_context_name(name: str, sec: SandboxSecurity) -> str:
    """The context ``sandbox up`` writes for the sandbox's administrator."""
    return f"sandbox-{name}-{ADMIN}" if sec.enabled else f"sandbox-{name}"


def context_names(name: str) -> list[str]:
    """Every opskit context ``sandbox up`` may write for sandbox ``name``."""
    return [f"sandbox-{name}", f"sandbox-{name}-{ADMIN}", f"sandbox-{name}-{MONITOR}"]


def write_contexts(name: str, bootstrap: str, sec: SandboxSecurity, mechanism: str = "PLAIN",
                   config_path: Path | None = None) -> list[str]:
    """Write the sandbox's opskit contexts: ``sandbox-NAME`` (plaintext), or
    ``sandbox-NAME-admin`` and ``sandbox-NAME-monitor`` (secured; the password by
    ``password_file``, never in the config). The first becomes the current context
    when there is none. Returns the names written."""
    from opskit.adapters.files.config_file import OpskitConfig

    cfg = OpskitConfig.load(config_path)
    if sec.enabled:
        written = {f"sandbox-{name}-{u}": sec.context_security(u, mechanism) for u in (ADMIN, MONITOR)}
    else:
        written = {admin_context_name(name, sec): {}}
    for ctx, security in written.items():
        cfg.set_context(ctx, bootstrap, "opskit", security or None)
    if not cfg.current_context:
        cfg.current_context = next(iter(written))
    cfg.save()
    return list(written)
