"""Kafka client properties (``--command-config FILE``), as Kafka's own tools read them (pure).

The file is a Java properties file (``key=value``, ``key: value`` or ``key value``; ``#``
and ``!`` comments; a trailing backslash continues a line; ``\\t``, ``\\n``, ``\\uXXXX``
escapes) holding the client settings Kafka's documentation shows::

    bootstrap.servers=kafka-0:9093
    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="alice" password="alice-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem

:func:`parse_properties` reads the text, :func:`parse_jaas` the login module line and
:func:`client_settings` turns the properties into opskit's connection settings, naming
every property it does not use. Malformed input raises ``ValueError`` with a one-line
message that never holds a value (values may be secrets).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: login modules sasl.jaas.config may name, by mechanism family
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: the JAAS control flags
_FLAGS = ("required", "requisite", "sufficient", "optional")

#: properties opskit reads (everything else is named in a warning)
SUPPORTED = frozenset({
    "bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.endpoint.identification.algorithm",
})
#: truststore types opskit can use, and the ones its clients cannot read
TRUSTSTORE_TYPES = ("PEM",)
UNREADABLE_TRUSTSTORE_TYPES = ("JKS", "PKCS12")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line): comments and blank lines dropped, continuations
    joined (a line ending in an odd number of backslashes continues; the next line's
    leading whitespace is dropped), as ``java.util.Properties.load`` does."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        out.append((start, (pending or "") + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def _unescape(s: str, number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            digits = s[i + 1:i + 5]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"line {number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and value of a logical line: the key ends at the first unescaped ``=``, ``:``
    or whitespace; whitespace and one ``=``/``:`` separate it from the value."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """The properties in ``text`` (a later key wins, as in Java). ``ValueError`` for a
    line without a key, a malformed ``\\u`` escape or a NUL byte."""
    if "\x00" in text:
        raise ValueError("holds a NUL byte (not a properties file)")
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        key = _unescape(raw_key, number).strip()
        if not key:
            raise ValueError(f"line {number}: no property name before the value")
        props[key] = _unescape(raw_value, number)
    return props


@dataclass(frozen=True)
class JaasLogin:
    """One login module entry of ``sasl.jaas.config``."""

    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(value: str) -> list[str]:
    """Words, quoted strings (as ``"..."`` with the quotes kept to tell them apart),
    ``=`` and ``;``."""
    out: list[str] = []
    i = 0
    while i < len(value):
        c = value[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append(c)
            i += 1
        elif c in "\"'":
            end = i + 1
            buf: list[str] = []
            while end < len(value) and value[end] != c:
                if value[end] == "\\" and end + 1 < len(value):
                    end += 1
                buf.append(value[end])
                end += 1
            if end >= len(value):
                raise ValueError("sasl.jaas.config has an unterminated quoted value")
            out.append('"' + "".join(buf))
            i = end + 1
        else:
            end = i
            while end < len(value) and not value[end].isspace() and value[end] not in "=;\"'":
                end += 1
            out.append(value[i:end])
            i = end
    return out


def parse_jaas(value: str) -> JaasLogin:
    """The one login module of a ``sasl.jaas.config`` value
    (``Module required key="value" ...;``). ``ValueError`` unless it is exactly one
    entry ending in ``;``; the message never holds an option's value."""
    toks = _tokens(value)
    if len(toks) < 3 or toks[-1] != ";":
        raise ValueError("sasl.jaas.config must be 'LoginModule required key=\"value\" ...;'")
    module, flag = toks[0], toks[1]
    if module.startswith('"') or module in "=;" or flag.lower() not in _FLAGS:
        raise ValueError("sasl.jaas.config must start with a login module class and a flag "
                         f"({', '.join(_FLAGS)})")
    body = toks[2:-1]
    if ";" in body:
        raise ValueError("sasl.jaas.config holds more than one login module (Kafka takes one)")
    options: dict[str, str] = {}
    i = 0
    while i < len(body):
        key = body[i]
        if (i + 2 >= len(body) or body[i + 1] != "=" or key.startswith('"') or key == "="
                or body[i + 2] == "="):
            raise ValueError("sasl.jaas.config: options must be key=\"value\"")
        val = body[i + 2]
        options[key] = val.removeprefix('"')
        i += 3
    return JaasLogin(module, flag.lower(), options)


@dataclass(frozen=True)
class ClientSettings:
    """What a properties file says about reaching the cluster, in opskit's terms."""

    bootstrap: str | None = None
    client_id: str | None = None
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    truststore_location: str | None = None
    truststore_type: str | None = None
    truststore_password: str | None = None
    verify_hostname: bool = True
    #: property names opskit does not read (named in one warning)
    ignored: tuple[str, ...] = ()

    def secrets(self) -> tuple[str, ...]:
        """Every secret value read (to be masked wherever it might appear)."""
        return tuple(s for s in (self.password, self.truststore_password) if s)


def client_settings(props: dict[str, str]) -> ClientSettings:
    """Translate Kafka client properties; ``ValueError`` (one line, no secret) when a
    property opskit reads has a value it cannot use."""
    def get(key: str) -> str | None:
        v = props.get(key)
        return v.strip() if v is not None and v.strip() else None

    protocol = (get("security.protocol") or "PLAINTEXT").upper()
    mechanism = get("sasl.mechanism")
    username = password = None
    jaas = props.get("sasl.jaas.config")
    if jaas is not None and jaas.strip():
        login = parse_jaas(jaas)
        family = {PLAIN_MODULE: "PLAIN", SCRAM_MODULE: "SCRAM"}.get(login.module)
        if family is None:
            raise ValueError(f"sasl.jaas.config: login module {login.module} is not supported "
                             f"(opskit logs in with {PLAIN_MODULE} or {SCRAM_MODULE})")
        mech = (mechanism or "GSSAPI").upper()
        if not mech.startswith(family):
            raise ValueError(f"sasl.jaas.config names {login.module.rsplit('.', 1)[-1]} but "
                             f"sasl.mechanism is {mech}")
        username, password = login.options.get("username"), login.options.get("password")
        if not username or password is None:
            raise ValueError("sasl.jaas.config needs username=\"...\" and password=\"...\"")
    elif protocol.startswith("SASL"):
        raise ValueError(f"security.protocol {protocol} needs sasl.jaas.config with a username "
                         "and password")
    ts_type = get("ssl.truststore.type")
    ts_location = get("ssl.truststore.location")
    if ts_location:
        # Kafka's default truststore type is JKS; a PEM file must say PEM
        kind = (ts_type or "JKS").upper()
        if kind in UNREADABLE_TRUSTSTORE_TYPES:
            raise ValueError(
                f"ssl.truststore.type {kind} is not supported: opskit's Kafka clients "
                "(librdkafka, kafka-python, Python's ssl) read PEM certificates only; export "
                "the CA with 'keytool -exportcert -rfc -keystore FILE -alias ALIAS' and set "
                "ssl.truststore.type=PEM")
        if kind not in TRUSTSTORE_TYPES:
            raise ValueError(f"ssl.truststore.type {kind} is not one of PEM, JKS, PKCS12")
        ts_type = kind
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    verify = True
    if algorithm is not None:
        a = algorithm.strip().lower()
        if a in ("", "none"):
            verify = False
        elif a != "https":
            raise ValueError("ssl.endpoint.identification.algorithm must be https or empty")
    ignored = tuple(sorted(k for k in props if k not in SUPPORTED))
    return ClientSettings(
        bootstrap=get("bootstrap.servers"), client_id=get("client.id"),
        security_protocol=protocol, sasl_mechanism=mechanism.upper() if mechanism else None,
        username=username, password=password, truststore_location=ts_location,
        truststore_type=ts_type, truststore_password=props.get("ssl.truststore.password"),
        verify_hostname=verify, ignored=ignored)
