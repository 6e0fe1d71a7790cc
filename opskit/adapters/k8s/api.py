"""The one module that talks to Kubernetes (the ``kubernetes`` client).

Objects are applied idempotently: created when absent, left alone when the live
object already has the wanted spec (so a rerun changes nothing and keeps the
resourceVersion), patched otherwise. ConfigMaps can be replaced with
compare-and-set on their resourceVersion, which is how the scale-out journal
detects a second, concurrent run. Client exceptions become opskit errors here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from opskit.errors import (
    InvalidInputError,
    KafkaOperationError,
    NotFoundError,
    OpskitError,
    RefusedError,
    ServiceUnavailableError,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class KubernetesError(KafkaOperationError):
    """The Kubernetes API server refused a request (exit 6, like a refused Kafka request)."""

    kind = "kubernetes_error"


@dataclass(frozen=True)
class KubeTarget:
    """How to reach the API server: a kubeconfig (default: ~/.kube/config or the
    in-cluster service account), or an explicit host, token file and CA file."""

    kubeconfig: str | None = None
    context: str | None = None
    host: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    timeout_s: float = 10.0


def _unreachable_cause(e: Exception) -> str:
    """"connection refused", "timed out", ... from urllib3's wrapped error."""
    import re

    cause = getattr(e, "reason", None) or e
    m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(cause))
    if m:
        return m.group(1).strip().lower()
    return type(cause).__name__


def _error(e: Exception, what: str, host: str | None = None) -> OpskitError:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(e, ApiException):
        status = int(e.status or 0)
        reason = str(e.reason or "").strip()
        if status == 404:
            return NotFoundError(f"{what}: not found on the Kubernetes API server")
        if status == 409:
            return RefusedError(f"{what}: changed by someone else meanwhile (conflict); "
                                "another run may be active")
        if status in (401, 403):
            return KubernetesError(f"{what}: the Kubernetes API server refused it ({status} "
                                   f"{reason}): check the service account's RBAC")
        return KubernetesError(f"{what}: the Kubernetes API server answered {status} {reason}")
    if isinstance(e, (HTTPError, OSError)):
        at = f" at {host}" if host else ""
        return ServiceUnavailableError(f"{what}: cannot reach the Kubernetes API server{at} "
                                       f"({_unreachable_cause(e)})")
    return _unparseable(what, e)


def _unparseable(what: str, e: Exception) -> OpskitError:
    """An answer that is not what the API returns (not JSON, the wrong shape): the server
    is not a Kubernetes API server, or something between opskit and it answered (exit 3)."""
    first = (str(e).splitlines() or [""])[0][:200]
    return ServiceUnavailableError(f"{what}: the Kubernetes API server answered something "
                                   f"opskit cannot parse ({type(e).__name__}: {first})")


#: a kubeconfig larger than this is not one (the kubernetes client would parse any size)
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    line = text[0] if text else type(e).__name__
    return line if len(line) <= 300 else line[:300] + "..."


def _read_kubeconfig(path: str) -> Any:
    """The parsed YAML of a kubeconfig file: bounded, one-line errors (missing: exit 4;
    a directory, binary, too large, malformed: exit 2)."""
    from opskit.adapters.files.safe_read import parse_yaml, read_text

    return parse_yaml(read_text(path, "kubeconfig", MAX_KUBECONFIG_BYTES), f"kubeconfig {path}")


def _client_from_kubeconfig(target: KubeTarget) -> Any:
    """An ApiClient from the kubeconfig the target names (or the client's default ones),
    each file read and checked by opskit first, so that a file that is not a kubeconfig
    is a one-line usage error (exit 2), never a client exception (or minutes of parsing)."""
    import os

    from kubernetes import config

    if target.kubeconfig is None:
        # the client's own default: $KUBECONFIG (a list of files, merged) or ~/.kube/config
        paths = [p for p in os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)
                 if p]
        for p in paths:
            if os.path.exists(os.path.expanduser(p)):
                _read_kubeconfig(os.path.expanduser(p))
    else:
        path = target.kubeconfig
        data = _read_kubeconfig(path)
        if not isinstance(data, dict) or not data:
            raise InvalidInputError(f"kubeconfig {path} is not a kubeconfig (expected a YAML "
                                    "mapping with clusters, users and contexts)")
        contexts = data.get("contexts")
        if not isinstance(contexts, list) or not all(isinstance(c, dict) for c in contexts):
            raise InvalidInputError(f"kubeconfig {path}: 'contexts' must be a list of "
                                    "named contexts")
        if target.context is not None and target.context not in [c.get("name")
                                                                 for c in contexts]:
            raise NotFoundError(f"kube context {target.context!r} is not in kubeconfig {path}")
    try:
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=target.kubeconfig, context=target.context)
    except config.ConfigException as e:
        if target.kubeconfig is None:
            raise
        raise InvalidInputError(f"kubeconfig {target.kubeconfig} is not usable: "
                                f"{_first_line(e)}") from None
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as e:
        # a mapping of the wrong shape deeper down (the client assumes the right one)
        where = target.kubeconfig or "the default kubeconfig"
        raise InvalidInputError(f"kubeconfig {where} is not usable: {type(e).__name__}: "
                                f"{_first_line(e)}") from None


class KubeApi:
    """A thin, typed facade over the calls the playbook needs."""

    def __init__(self, target: KubeTarget) -> None:
        from kubernetes import client, config

        self.target = target
        try:
            if target.host:
                cfg = client.Configuration()
                cfg.host = target.host
                if target.token_file:
                    from opskit.adapters.files.safe_read import read_secret

                    cfg.api_key = {"authorization": "Bearer "
                                   + read_secret(target.token_file, "Kubernetes token file")}
                if target.ca_file:
                    cfg.ssl_ca_cert = target.ca_file
                api = client.ApiClient(cfg)
            else:
                try:
                    if target.kubeconfig or target.context:
                        raise config.ConfigException("a kubeconfig was asked for")
                    config.load_incluster_config()  # type: ignore[no-untyped-call]
                    api = client.ApiClient()
                except config.ConfigException:
                    api = _client_from_kubeconfig(target)
        except config.ConfigException as e:
            raise NotFoundError(f"no usable Kubernetes configuration: {_first_line(e)}") from None
        from opskit.adapters.http.deadline import install

        install(api.rest_client.pool_manager)  # each call ends by its deadline (_call)
        self._api = api
        if getattr(api.configuration, "verify_ssl", True) is False:
            # the kubeconfig asked for it (insecure-skip-tls-verify): said once at debug
            # level, not as urllib3's two-line warning on every request
            import warnings

            from urllib3.exceptions import InsecureRequestWarning

            log.debug("TLS verification of the Kubernetes API server is off (kubeconfig)")
            warnings.filterwarnings("ignore", category=InsecureRequestWarning)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.coordination = client.CoordinationV1Api(api)
        self._timeout = target.timeout_s

    # --- generic -------------------------------------------------------------
    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn(*args)`` within the timeout, all of it: connect, TLS handshake, answer and
        the client's retries (a server dripping bytes cannot stretch it)."""
        from opskit.adapters.http.deadline import deadline

        kw.setdefault("_request_timeout", self._timeout)
        with deadline(self._timeout) as watch:
            try:
                return fn(*args, **kw)
            except Exception as e:  # noqa: BLE001 - translated in one place
                if watch.expired:
                    raise ServiceUnavailableError(
                        f"{what}: the Kubernetes API server did not answer within "
                        f"{self._timeout:g}s") from None
                raise _error(e, what, getattr(self._api.configuration, "host", None)) from None

    def _read(self, what: str, parse: Callable[[], T]) -> T:
        """``parse()`` over an answer: a field missing or of the wrong type is an answer
        opskit cannot parse (exit 3), not a crash."""
        try:
            return parse()
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            raise _unparseable(what, e) from None

    def to_dict(self, obj: Any, what: str = "an answer") -> dict[str, Any]:
        return dict(self._read(what, lambda: dict(
            self._api.sanitize_for_serialization(obj))))  # type: ignore[no-untyped-call]

    # --- StatefulSets and Services ---------------------------------------------
    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj = self._call(f"StatefulSet {namespace}/{name}",
                             self.apps.read_namespaced_stateful_set, name, namespace)
        except NotFoundError:
            return None
        return self.to_dict(obj)

    def apply_statefulset(self, manifest: Mapping[str, Any]) -> str:
        """Create, or bring the live spec to ``manifest``'s; returns created/unchanged/patched."""
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        what = f"StatefulSet {ns}/{name}"
        live = self.get_statefulset(ns, name)
        if live is None:
            self._call(what, self.apps.create_namespaced_stateful_set, ns, manifest)
            return "created"
        if _contains(live.get("spec", {}), manifest.get("spec", {})):
            return "unchanged"
        spec: dict[str, Any] = {"replicas": manifest["spec"]["replicas"],
                                "template": manifest["spec"]["template"]}
        if "updateStrategy" in manifest["spec"]:   # OnDelete must drop rollingUpdate
            spec["updateStrategy"] = {"rollingUpdate": None,
                                      **manifest["spec"]["updateStrategy"]}
        self._call(what, self.apps.patch_namespaced_stateful_set, name, ns, {"spec": spec})
        return "patched"

    def replace_statefulset(self, manifest: Mapping[str, Any]) -> None:
        """Replace exactly the version read (``metadata.resourceVersion`` of a live
        object ``get_statefulset`` returned, changed); RefusedError when someone else
        changed it meanwhile."""
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        self._call(f"StatefulSet {ns}/{name}", self.apps.replace_namespaced_stateful_set,
                   name, ns, manifest)

    def apply_service(self, manifest: Mapping[str, Any]) -> str:
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        what = f"Service {ns}/{name}"
        try:
            live = self.to_dict(self._call(what, self.core.read_namespaced_service, name, ns))
        except NotFoundError:
            self._call(what, self.core.create_namespaced_service, ns, manifest)
            return "created"
        if _contains(live.get("spec", {}), manifest.get("spec", {})):
            return "unchanged"
        self._call(what, self.core.patch_namespaced_service, name, ns,
                   {"spec": {"selector": manifest["spec"]["selector"],
                             "ports": manifest["spec"]["ports"]}})
        return "patched"

    # --- ConfigMaps with compare-and-set ----------------------------------------
    def read_configmap(self, namespace: str, name: str) -> tuple[dict[str, str], str] | None:
        """(data, resourceVersion), or None when absent."""
        try:
            cm = self._call(f"ConfigMap {namespace}/{name}",
                            self.core.read_namespaced_config_map, name, namespace)
        except NotFoundError:
            return None
        return self._read(f"ConfigMap {namespace}/{name}", lambda: (
            {str(k): str(v) for k, v in dict(cm.data or {}).items()},
            _version(cm.metadata.resource_version)))

    def write_configmap(self, manifest: Mapping[str, Any], resource_version: str | None) -> str:
        """Create (``resource_version`` None: must not exist) or replace exactly the
        version read; RefusedError when someone else wrote it meanwhile. Returns the new
        resourceVersion."""
        return self._cas("ConfigMap", self.core.create_namespaced_config_map,
                         self.core.replace_namespaced_config_map, manifest, resource_version)

    def _cas(self, kind: str, create: Any, replace: Any, manifest: Mapping[str, Any],
             resource_version: str | None) -> str:
        """Create (None: must not exist) or replace exactly ``resource_version``."""
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        what = f"{kind} {ns}/{name}"
        if resource_version is None:
            obj = self._call(what, create, ns, manifest)
        else:
            body = {**manifest, "metadata": {**manifest["metadata"],
                                             "resourceVersion": resource_version}}
            obj = self._call(what, replace, name, ns, body)
        return str(self._read(what, lambda: _version(obj.metadata.resource_version)))

    def delete_configmap(self, namespace: str, name: str) -> bool:
        """Delete it; False when it was already absent."""
        try:
            self._call(f"ConfigMap {namespace}/{name}",
                       self.core.delete_namespaced_config_map, name, namespace)
        except NotFoundError:
            return False
        return True

    # --- Pods ------------------------------------------------------------------
    def _pod(self, namespace: str, name: str) -> Any | None:
        """The pod of that name as the API returns it, None when absent."""
        try:
            return self._call(f"Pod {namespace}/{name}", self.core.read_namespaced_pod,
                              name, namespace)
        except NotFoundError:
            return None

    def pod_ready(self, namespace: str, name: str) -> bool | None:
        """True when the pod's Ready condition is True, False when not, None when absent."""
        pod = self._pod(namespace, name)
        if pod is None:
            return None

        def ready() -> bool:
            conditions = (pod.status.conditions if pod.status is not None else None) or []
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        return bool(self._read(f"Pod {namespace}/{name}", ready))

    def pod_uid(self, namespace: str, name: str) -> str | None:
        """The uid of the pod of that name (a recreated pod has a new one), None when absent."""
        pod = self._pod(namespace, name)
        if pod is None:
            return None
        return str(self._read(f"Pod {namespace}/{name}", lambda: _version(pod.metadata.uid)))

    def delete_pod(self, namespace: str, name: str, uid: str) -> bool:
        """Delete that pod if it is still the one with ``uid`` (graceful: its container
        gets SIGTERM, then its StatefulSet makes a new one); False when it is already
        gone or replaced."""
        from kubernetes import client

        try:
            self._call(f"Pod {namespace}/{name}", self.core.delete_namespaced_pod, name,
                       namespace, body=client.V1DeleteOptions(
                           preconditions=client.V1Preconditions(uid=uid)))
        except (NotFoundError, RefusedError):   # gone, or a newer pod of that name
            return False
        return True

    # --- Leases (one active run) -------------------------------------------------
    def read_lease(self, namespace: str, name: str) -> tuple[dict[str, Any], str] | None:
        """(spec, resourceVersion) of a coordination.k8s.io Lease, or None when absent."""
        try:
            obj = self._call(f"Lease {namespace}/{name}",
                             self.coordination.read_namespaced_lease, name, namespace)
        except NotFoundError:
            return None
        d = self.to_dict(obj)
        return self._read(f"Lease {namespace}/{name}", lambda: (
            dict(d.get("spec") or {}), _version(d["metadata"]["resourceVersion"])))

    def write_lease(self, manifest: Mapping[str, Any], resource_version: str | None) -> str:
        """Create (``resource_version`` None) or replace exactly the version read;
        RefusedError when another holder wrote it meanwhile."""
        return self._cas("Lease", self.coordination.create_namespaced_lease,
                         self.coordination.replace_namespaced_lease, manifest, resource_version)


def _version(value: Any) -> str:
    """A resourceVersion: the API server always sends one (compare-and-set needs it)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"resourceVersion {value!r}")
    return value


def _contains(live: Any, want: Any) -> bool:
    """Every field of ``want`` has the same value in ``live`` (the server adds defaults)."""
    if isinstance(want, Mapping):
        return isinstance(live, Mapping) and all(
            k in live and _contains(live[k], v) for k, v in want.items())
    if isinstance(want, list):
        return (isinstance(live, list) and len(live) == len(want)
                and all(_contains(a, b) for a, b in zip(live, want, strict=True)))
    if isinstance(want, (int, float)) and isinstance(live, str):
        return str(want) == live
    return bool(live == want)
