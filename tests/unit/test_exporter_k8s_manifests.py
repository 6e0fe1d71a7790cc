"""deploy/kubernetes: loaded into the real `kubernetes` client models, cross-checked.

No API server here (none installable from the allowed registries in reasonable
time), so this is a model + structural check: every field of the core objects
must survive a round trip through the typed models (a misspelt field is
dropped by the model and the test fails), the probes point at the exporter's
real endpoints, the container args parse with the real CLI, and the Service,
ServiceMonitor and Secret references line up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from kubernetes import client

from opskit.adapters.files.config_file import OpskitConfig
from opskit.cli import main as cli_main

K8S = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
MODELS = {("v1", "ConfigMap"): "V1ConfigMap", ("apps/v1", "Deployment"): "V1Deployment",
          ("v1", "Service"): "V1Service", ("v1", "Secret"): "V1Secret"}


def _docs() -> dict[str, dict[str, Any]]:
    out = {}
    for f in sorted(K8S.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        doc = yaml.safe_load(f.read_text())
        out[doc["kind"]] = doc
    return out


def _strip_none(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _strip_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [_strip_none(v) for v in x]
    return x


def _norm(x: Any) -> Any:
    """YAML ints and strings for quantities/ports compare as strings."""
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_norm(v) for v in x]
    return str(x)


@pytest.mark.parametrize("kind", ["ConfigMap", "Deployment", "Service", "Secret"])
def test_core_objects_round_trip_through_client_models(kind: str):
    doc = _docs()[kind]
    api = client.ApiClient()
    model = api.deserialize(json.dumps(doc), MODELS[(doc["apiVersion"], kind)], "application/json")
    back = _strip_none(api.sanitize_for_serialization(model))
    assert _norm(back) == _norm(doc)


def test_kustomization_lists_every_manifest_but_the_example_secret():
    kz = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {f.name for f in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert set(kz["resources"]) == files


def test_deployment_probes_ports_resources_and_args():
    docs = _docs()
    dep = docs["Deployment"]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    port = next(p for p in c["ports"] if p["name"] == "metrics")
    for k in ("cpu", "memory"):
        assert k in c["resources"]["requests"] and k in c["resources"]["limits"]
    # the args parse with the real CLI (typer/click), and the port is the one exposed
    args = list(c["args"])
    assert c["command"] == ["opskit"]
    i = args.index("exporter")
    register_all = getattr(cli_main, "register_all", None)
    if register_all is not None:  # commands are registered lazily by main()
        register_all()
    root = typer.main.get_command(cli_main.app)
    ctx = root.make_context("opskit", args[:i])  # global options come before the command
    assert ctx.params["log_format"] == "json"
    sub_ctx = root.commands["exporter"].make_context("exporter", args[i + 1:], parent=ctx)  # type: ignore[attr-defined]
    assert sub_ctx.params["port"] == port["containerPort"] == 9308
    assert sub_ctx.params["context"] == "hip30"
    # the selector selects the pod template
    assert dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_config_secret_service_and_servicemonitor_line_up(tmp_path: Path):
    docs = _docs()
    dep, svc, sm, cm, secret = (docs[k] for k in ("Deployment", "Service", "ServiceMonitor",
                                                   "ConfigMap", "Secret"))
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    # the context in the ConfigMap loads, and its secret files are in the Secret volume
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(cm["data"]["config.yaml"])
    secret_vol = vols["kafka-credentials"]["secret"]
    assert secret_vol["secretName"] == secret["metadata"]["name"]
    raw = yaml.safe_load(cm["data"]["config.yaml"])["contexts"]["hip30"]["security"]
    for key in ("password_file", "ca"):
        path = Path(raw[key])
        assert str(path.parent) == mounts["kafka-credentials"]
        assert path.name in {i["path"] for i in secret_vol["items"]}
        assert {i["key"] for i in secret_vol["items"]} <= set(secret["stringData"])
    env = {e["name"]: e["value"] for e in c["env"]}
    assert Path(env["OPSKIT_CONFIG"]).parent == Path(mounts["config"])
    assert vols["config"]["configMap"]["name"] == cm["metadata"]["name"]
    secret_dir = tmp_path / "secrets"
    secret_dir.mkdir()
    (secret_dir / "password").write_text("pw\n")
    cfg_path.write_text(cm["data"]["config.yaml"].replace(mounts["kafka-credentials"], str(secret_dir)))
    conn = OpskitConfig.load(cfg_path).context("hip30")
    assert conn.security_protocol == "SASL_SSL" and conn.password == "pw"
    # Service -> pods, ServiceMonitor -> Service port
    assert svc["spec"]["selector"].items() <= pod_labels(dep).items()
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"


def pod_labels(dep: dict[str, Any]) -> dict[str, str]:
    return dep["spec"]["template"]["metadata"]["labels"]  # type: ignore[no-any-return]
