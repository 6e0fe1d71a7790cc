"""Kafka ACLs through confluent-kafka's AdminClient (DescribeAcls, CreateAcls, DeleteAcls),
and the ACL backups written before a change.

Every vendor error goes through :meth:`KafkaAdmin.translate`; a broker with no
authorizer (``SECURITY_DISABLED``) is reported as such, never as "no ACLs".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.files.safe_write import write_file
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.admin.errors import error_name, error_text
from opskit.adapters.offsets.admin import OffsetsAdmin
from opskit.core.acls import AclEntry
from opskit.errors import InvalidInputError, KafkaOperationError, NotAuthorisedError, OpskitError
from opskit.paths import state_dir

log = logging.getLogger(__name__)

BACKUP_FORMAT = "opskit/acls-backup"
_NO_AUTHORIZER = {"SECURITY_DISABLED"}
_NOT_AUTHORISED = {"CLUSTER_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                   "GROUP_AUTHORIZATION_FAILED"}


class NoAuthorizerError(KafkaOperationError):
    """The cluster has no authorizer: it holds no ACLs and enforces none."""


def _acl_mod() -> Any:
    import confluent_kafka.admin as adm

    return adm


def _vendor(e: AclEntry, filter_: bool = False) -> Any:
    """confluent-kafka's AclBinding for ``e`` (or the AclBindingFilter matching exactly it)."""
    adm = _acl_mod()
    rtype = "BROKER" if e.resource_type == "CLUSTER" else e.resource_type
    cls = adm.AclBindingFilter if filter_ else adm.AclBinding
    return cls(adm.ResourceType[rtype], e.resource_name, adm.ResourcePatternType[e.pattern_type],
               e.principal, e.host, adm.AclOperation[e.operation],
               adm.AclPermissionType[e.permission])


def _entry(b: Any) -> AclEntry:
    rtype = b.restype.name
    return AclEntry(principal=str(b.principal),
                    resource_type="CLUSTER" if rtype == "BROKER" else rtype,
                    resource_name=str(b.name), operation=b.operation.name,
                    permission=b.permission_type.name, pattern_type=b.resource_pattern_type.name,
                    host=str(b.host))


class AclsAdmin(KafkaAdmin):
    """A :class:`KafkaAdmin` that also reads and changes ACLs."""

    def __enter__(self) -> Self:
        return self

    def _acl_error(self, exc: BaseException, what: str) -> OpskitError:
        name = error_name(exc)
        if name in _NO_AUTHORIZER:
            return self._no_authorizer(what)
        if name in _NOT_AUTHORISED:
            return self._not_authorised(what, error_text(exc))
        return self.translate(exc, what)

    def _no_authorizer(self, what: str) -> NoAuthorizerError:
        return NoAuthorizerError(f"{what}: the cluster at {self.conn.bootstrap} has no authorizer "
                                 "(authorizer.class.name is not set), so it holds no ACLs")

    def _not_authorised(self, what: str, detail: str) -> NotAuthorisedError:
        need = "Describe" if "describ" in what else "Alter"
        return NotAuthorisedError(f"not authorised for {what}: {self.conn.principal} needs {need} "
                                  f"on the cluster ({detail})")

    def acls(self) -> tuple[AclEntry, ...]:
        """Every ACL binding on the cluster (one DescribeAcls)."""
        adm = _acl_mod()
        flt = adm.AclBindingFilter(adm.ResourceType.ANY, None, adm.ResourcePatternType.ANY, None,
                                   None, adm.AclOperation.ANY, adm.AclPermissionType.ANY)
        what = "describing ACLs"
        self.round_trips += 1
        try:
            res = self._admin.describe_acls(flt, **self._kw()).result(timeout=self.timeout + 2)
        except BaseException as e:
            raise self._acl_error(e, what) from e
        if not res:
            # librdkafka drops DescribeAcls' top-level error code: "no authorizer" and "not
            # authorised" both look like an empty answer. Ask once more through kafka-python,
            # which raises them (only when the answer is empty).
            self._confirm_empty(what)
        return tuple(sorted(_entry(b) for b in res))

    def _confirm_empty(self, what: str) -> None:
        from kafka.admin import (  # type: ignore[import-untyped]
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            KafkaAdminClient,
            ResourcePatternFilter,
        )
        from kafka.admin import ResourceType as KpResourceType
        from kafka.errors import KafkaError as KpKafkaError  # type: ignore[import-untyped]
        from kafka.errors import KafkaTimeoutError, SecurityDisabledError

        from opskit.adapters.kafka.kafka_python import kafka_python_config
        from opskit.errors import KafkaUnavailableError

        flt = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                               ACLResourcePatternType.ANY))
        client = None
        self.round_trips += 1
        try:
            client = KafkaAdminClient(**kafka_python_config(self.conn, self.timeout))
            client.describe_acls(flt)
        except SecurityDisabledError as e:
            raise self._no_authorizer(what) from e
        except KafkaTimeoutError as e:
            raise KafkaUnavailableError(
                f"cannot reach Kafka at {self.conn.bootstrap} ({what}): {e}") from e
        except KpKafkaError as e:
            if "Authorization" in type(e).__name__:
                raise self._not_authorised(what, type(e).__name__) from e
            raise KafkaOperationError(f"{what} failed: {type(e).__name__}") from e
        finally:
            if client is not None:
                client.close()

    def create_acls(self, entries: Iterable[AclEntry]) -> None:
        todo = sorted(set(entries))
        if not todo:
            return
        self.round_trips += 1
        futs = self._admin.create_acls([_vendor(e) for e in todo], **self._kw())
        failed: list[tuple[AclEntry, OpskitError]] = []
        for e, fut in zip(todo, futs.values()):
            try:
                fut.result(timeout=self.timeout + 2)
            except BaseException as exc:  # noqa: BLE001 - collected, reported once below
                failed.append((e, self._acl_error(exc, f"creating ACL ({e.describe()})")))
        if failed:
            first = failed[0][1]
            raise type(first)(f"{first} ({len(todo) - len(failed)} of {len(todo)} created)")

    def delete_acls(self, entries: Iterable[AclEntry]) -> int:
        """Delete exactly these entries (each filter names every field). Returns how many
        bindings the broker deleted."""
        todo = sorted(set(entries))
        if not todo:
            return 0
        self.round_trips += 1
        futs = self._admin.delete_acls([_vendor(e, filter_=True) for e in todo], **self._kw())
        deleted = 0
        for e, fut in zip(todo, futs.values()):
            try:
                deleted += len(fut.result(timeout=self.timeout + 2))
            except BaseException as exc:
                raise self._acl_error(exc, f"deleting ACL ({e.describe()})") from exc
        return deleted


_ALL_CLUSTER_OPS = frozenset({"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                              "ALTER_CONFIGS", "IDEMPOTENT_WRITE"})


def limited_principal(admin: KafkaAdmin) -> bool:
    """Whether the connection's principal is held back by ACLs: the operations the cluster
    allows it (DescribeCluster) are not all of them. A super user, or a cluster without an
    authorizer, is allowed everything. Unknown (no answer) counts as limited."""
    try:
        res = admin._admin.describe_cluster(include_authorized_operations=True,
                                            request_timeout=admin.timeout)
        ops = res.result(timeout=admin.timeout + 2).authorized_operations
    except Exception as e:  # noqa: BLE001 - an unknown answer is treated as limited
        log.debug("DescribeCluster for authorized operations failed: %s", e)
        return True
    return ops is None or not _ALL_CLUSTER_OPS <= {o.name for o in ops}


# --------------------------------------------------------------------------- backups


@dataclass(frozen=True)
class AclBackup:
    path: Path
    entries: tuple[AclEntry, ...]


def backups_dir() -> Path:
    return state_dir() / "acl-backups"


def save_acl_backup(entries: Iterable[AclEntry], bootstrap: str, reason: str,
                    directory: Path | None = None, now_ms: int | None = None) -> AclBackup:
    """Write every current ACL binding to a JSON file before a change (0600)."""
    taken = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    d = directory or backups_dir()
    stem = f"acls-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(taken / 1000))}.{taken % 1000:03d}Z"
    path, n = d / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = d / f"{stem}-{n}.json"
    kept = tuple(sorted(set(entries)))
    data = {"format": BACKUP_FORMAT, "version": 1, "taken_at_ms": taken, "bootstrap": bootstrap,
            "reason": reason, "acls": [e.to_dict() for e in kept]}
    write_file(path, json.dumps(data, indent=2) + "\n", what="ACL backup")
    return AclBackup(path, kept)


def load_acl_backup(path: Path) -> AclBackup:
    data = parse_json(read_text(path, "ACL backup"), f"ACL backup {path}")
    if not isinstance(data, dict) or data.get("format") != BACKUP_FORMAT \
            or not isinstance(data.get("acls"), list):
        raise InvalidInputError(f"{path} is not an opskit ACL backup (format field)")
    entries = tuple(AclEntry.from_dict(a) for a in data["acls"])
    for e in entries:
        problems = e.problems()
        if problems:
            raise InvalidInputError(f"ACL backup {path}: {problems[0]}")
    return AclBackup(path, entries)


class DrAdmin(AclsAdmin, OffsetsAdmin):
    """What ``opskit dr`` needs: offsets, topics and ACLs on one connection."""

    def __enter__(self) -> Self:
        return self

    def acls_or_note(self) -> tuple[tuple[AclEntry, ...] | None, str | None]:
        """The cluster's ACLs, or (None, why) when it has no authorizer or will not say."""
        try:
            return self.acls(), None
        except NoAuthorizerError:
            return None, "ACLs not recorded: the cluster has no authorizer (SECURITY_DISABLED)"
        except NotAuthorisedError as e:
            return None, f"ACLs not recorded: {e}"
