"""charts/daemonjob with the real Helm 4 and Helm 3: lint, schema, and the same objects as
manifests/.

No cluster: `helm template` renders as for a current API server (policy/v1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from installtools import CHART, MANIFESTS, NAMESPACE, docs, helm_env, key, kustomize, run, without_helm_labels

from daemonjob import cli

MONITORING_ON = (
    "--set",
    "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true",
)


HELMS = pytest.mark.parametrize("helm", ["helm", "helm3"])


def template(tmp_path: Path, *args: str, helm: str = "helm") -> list[dict]:
    return docs(run(helm, "template", "daemonjob", str(CHART), "-n", NAMESPACE, *args, env=helm_env(tmp_path)).stdout)


@HELMS
def test_lint_strict(tmp_path: Path, helm: str) -> None:
    out = run(helm, "lint", "--strict", str(CHART), env=helm_env(tmp_path))
    assert "0 chart(s) failed" in out.stdout


@pytest.mark.parametrize(
    "components,extra",
    [
        ((), ()),
        (("monitoring",), MONITORING_ON),
        (("namespaced",), ("--set", f"watchNamespace={NAMESPACE}")),
        (("cert-manager",), ("--set", "webhook.certManager.enabled=true")),
        # the component's sample namespace is ops
        (("node-maintenance",), ("--set", "nodeMaintenance.enabled=true,nodeMaintenance.namespaces={ops}")),
    ],
    ids=["base", "monitoring", "namespaced", "cert-manager", "node-maintenance"],
)
@HELMS
def test_chart_renders_what_kustomize_renders(
    tmp_path: Path, components: tuple[str, ...], extra: tuple[str, ...], helm: str
) -> None:
    """One source of truth: with default values the chart is manifests/, object for object
    (and each kustomize component is the chart's matching values).

    The Namespace is left to `helm install --create-namespace`; everything else is equal once
    the chart's own labels and its hooks (the Job release-nodes) are set aside.
    """
    rendered = template(tmp_path, *extra, helm=helm)
    # Helm's hooks have no kustomize counterpart (make undeploy runs release-nodes itself)
    chart = {
        key(d): without_helm_labels(d) for d in rendered if "helm.sh/hook" not in d["metadata"].get("annotations", {})
    }
    built = {key(d): d for d in kustomize(*components, tmp=tmp_path) if d["kind"] != "Namespace"}
    assert sorted(chart) == sorted(built)
    for k, doc in built.items():
        assert chart[k] == doc, f"{k} differs from manifests/"


def test_non_default_values_reach_the_objects(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        json.dumps(
            {
                "image": {
                    "repository": "registry.example.com/dj",
                    "digest": "sha256:" + "a" * 64,
                    "pullPolicy": "Always",
                },
                "imagePullSecrets": [{"name": "regcred"}],
                "replicas": 3,
                "priorityClassName": "system-cluster-critical",
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"operator": "Exists"}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "daemonjob-controller"}},
                    }
                ],
                "extraArgs": ["--workers=8"],
                "logLevel": "debug",
                "logFormat": "console",
                "watchNamespace": "ops",
                "leaderElection": {"leaseDuration": 30, "renewDeadline": 20, "retryPeriod": 4},
                "podDisruptionBudget": {"maxUnavailable": 1},
                "rbac": {"aggregateRoles": False},
                "crds": {"enabled": False},
            }
        )
    )
    objs = {
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")): d
        for d in template(tmp_path, "-f", str(values))
    }
    deploy = objs["Deployment", "daemonjob-controller", NAMESPACE]
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "registry.example.com/dj@sha256:" + "a" * 64
    assert container["imagePullPolicy"] == "Always"
    assert deploy["spec"]["replicas"] == 3
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "zone"
    for arg in (
        "--workers=8",
        "--log-level=debug",
        "--log-format=console",
        "--namespace=ops",
        "--leader-election-lease-duration=30",
        "--leader-election-renew-deadline=20",
        "--leader-election-retry-period=4",
        f"--leader-election-namespace={NAMESPACE}",
    ):
        assert arg in container["args"]
    assert objs["PodDisruptionBudget", "daemonjob-controller", NAMESPACE]["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "daemonjob-controller"}},
    }
    # Namespaced install: Jobs, DaemonJobs, ConfigMaps and Events by a Role in the watched
    # namespace; the ClusterRole keeps Nodes only.
    assert objs["ClusterRole", "daemonjob-controller", ""]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]
    role = objs["Role", "daemonjob-controller", "ops"]
    assert {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "delete", "patch"],
    } in role["rules"]
    assert objs["RoleBinding", "daemonjob-controller", "ops"]["subjects"][0]["namespace"] == NAMESPACE
    assert not any(k[0] == "CustomResourceDefinition" for k in objs)
    assert ("ClusterRole", "daemonjob-view", "") not in objs


def test_tag_defaults_to_app_version(tmp_path: Path) -> None:
    chart = json.loads(json.dumps(__import__("yaml").safe_load((CHART / "Chart.yaml").read_text())))
    deploy = next(d for d in template(tmp_path, "--set", "image.repository=r/dj") if d["kind"] == "Deployment")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == f"r/dj:{chart['appVersion']}"


@pytest.mark.parametrize(
    "setting",
    [
        "replicas=two",
        "logFormat=xml",
        "leaderElection.leaseDuration=soon",
        "monitoring.serviceMonitor.enabled=yes",
        "image.digest=latest",
        "replica=2",
        "webhook.failurePolicy=Sometimes",
        "webhook.timeoutSeconds=60",
        "webhook.nodeParameterKeys={bad key!}",
        "metrics.secure=yes",
        "nodeMaintenance.enabled=yes",
        "nodeMaintenance.namespaces={Ops}",
        "argocd.healthCheck.enabled=yes",
    ],
    ids=lambda v: v.split("=")[0],
)
@HELMS
def test_schema_refuses_a_wrong_value_naming_the_field(tmp_path: Path, setting: str, helm: str) -> None:
    field = setting.split("=")[0]
    flag = "--set-string" if setting.endswith(("=two", "=yes")) else "--set"
    out = run(helm, "template", "daemonjob", str(CHART), flag, setting, env=helm_env(tmp_path), check=False)
    assert out.returncode != 0
    # Helm 4 names the field as a JSON pointer, Helm 3 by its dotted path (an unknown one by its name).
    assert "schema" in out.stderr, out.stderr
    assert "/" + field.replace(".", "/") in out.stderr or field in out.stderr, out.stderr


def by_key(docs_: list[dict]) -> dict[tuple[str, str, str], dict]:
    return {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")): d for d in docs_}


def test_insecure_metrics_are_plain_http_on_8080(tmp_path: Path) -> None:
    objs = by_key(template(tmp_path, *MONITORING_ON, "--set", "metrics.secure=false"))
    pod = objs["Deployment", "daemonjob-controller", NAMESPACE]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert "--metrics-bind-address=:8080" in container["args"] and "--metrics-secure=false" in container["args"]
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8080"
    assert "prometheus.io/scheme" not in pod["metadata"]["annotations"]
    assert objs["Service", "daemonjob-controller-metrics", NAMESPACE]["spec"]["ports"][0]["port"] == 8080
    endpoint = objs["ServiceMonitor", "daemonjob-controller", NAMESPACE]["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint and "bearerTokenFile" not in endpoint
    # Nothing reviews tokens any more.
    assert not any(k[1].startswith("daemonjob-metrics-") for k in objs)


def test_servicemonitor_names_the_release_namespace(tmp_path: Path) -> None:
    docs_ = docs(
        run("helm", "template", "daemonjob", str(CHART), "-n", "ops", *MONITORING_ON, env=helm_env(tmp_path)).stdout
    )
    monitor = by_key(docs_)["ServiceMonitor", "daemonjob-controller", "ops"]
    assert monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"] == "daemonjob-controller-metrics.ops.svc"


def test_helm_show_readme_prints_the_generated_readme(tmp_path: Path) -> None:
    out = run("helm", "show", "readme", str(CHART), env=helm_env(tmp_path)).stdout
    assert out.strip() == (CHART / "README.md").read_text().strip()
    assert "`monitoring.runbookBaseURL`" in out


def test_runbook_urls_are_absolute_under_the_runbook_base(tmp_path: Path) -> None:
    """Alertmanager's receivers link out of the cluster: every runbook_url is absolute, under
    monitoring.runbookBaseURL, and keeps its alert's section."""
    base = "https://docs.example.com/daemonjob/runbooks/"
    for args, want in (
        ((), "https://daemonjob.github.io/daemonjob/runbooks/"),
        (("--set", f"monitoring.runbookBaseURL={base}"), base),
    ):
        rule = by_key(template(tmp_path, *MONITORING_ON, *args))["PrometheusRule", "daemonjob-controller", NAMESPACE]
        alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
        assert alerts
        for alert in alerts:
            assert alert["annotations"]["runbook_url"] == f"{want}#{alert['alert'].lower()}"


def test_webhook_off_leaves_no_webhook_object(tmp_path: Path) -> None:
    objs = by_key(template(tmp_path, "--set", "webhook.enabled=false"))
    container = objs["Deployment", "daemonjob-controller", NAMESPACE]["spec"]["template"]["spec"]["containers"][0]
    assert "--webhook-bind-address=0" in container["args"]
    assert [p["name"] for p in container["ports"]] == ["metrics", "health"]
    assert not any("webhook" in k[1] for k in objs), sorted(objs)
    policy = objs["NetworkPolicy", "daemonjob-controller", NAMESPACE]
    assert [r["ports"][0]["port"] for r in policy["spec"]["ingress"]] == ["metrics"]


def test_webhook_and_network_policy_values(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        json.dumps(
            {
                "webhook": {
                    "timeoutSeconds": 10,
                    "failurePolicy": "Ignore",
                    "nodeParameterKeys": ["topology.kubernetes.io/zone", "example.com/*"],
                    "clientCA": {"configMap": "apiserver-webhook-client-ca"},
                    "certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
                },
                # Helm merges maps with the defaults: null removes a default.
                "networkPolicy": {
                    "metricsFrom": {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": None, "team": "obs"}},
                        "podSelector": None,
                    }
                },
            }
        )
    )
    objs = by_key(template(tmp_path, "-f", str(values)))
    hook = objs["ValidatingWebhookConfiguration", "daemonjob-validating-webhook", ""]["webhooks"][0]
    assert (hook["timeoutSeconds"], hook["failurePolicy"]) == (10, "Ignore")
    container = objs["Deployment", "daemonjob-controller", NAMESPACE]["spec"]["template"]["spec"]["containers"][0]
    assert "--node-parameter-keys=topology.kubernetes.io/zone,example.com/*" in container["args"]
    parsed = cli.parser().parse_args(container["args"])
    assert parsed.node_parameter_keys.allows("example.com/rack")
    assert parsed.webhook_client_ca_file == "/etc/daemonjob/webhook-client-ca/ca.crt"
    pod = objs["Deployment", "daemonjob-controller", NAMESPACE]["spec"]["template"]["spec"]
    assert {
        "name": "webhook-client-ca",
        "mountPath": "/etc/daemonjob/webhook-client-ca",
        "readOnly": True,
    } in container["volumeMounts"]
    assert {
        "name": "webhook-client-ca",
        "configMap": {"name": "apiserver-webhook-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
    } in pod["volumes"]
    # The given issuer signs the serving certificate: no self-signed Issuer nor CA of the release's own.
    assert objs["Certificate", "daemonjob-webhook", NAMESPACE]["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }
    assert not any(k[0] == "Issuer" for k in objs) and ("Certificate", "daemonjob-webhook-ca", NAMESPACE) not in objs
    assert ("Secret", "daemonjob-webhook-tls", NAMESPACE) not in objs
    assert objs["NetworkPolicy", "daemonjob-controller", NAMESPACE]["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"team": "obs"}}}
    ]
    assert ("NetworkPolicy", "daemonjob-controller", NAMESPACE) not in by_key(
        template(tmp_path, "--set", "networkPolicy.enabled=false")
    )


def test_network_policy_needs_a_scraper_selector(tmp_path: Path) -> None:
    out = run(
        "helm",
        "template",
        "daemonjob",
        str(CHART),
        "--set",
        "networkPolicy.metricsFrom.namespaceSelector=null,networkPolicy.metricsFrom.podSelector=null",
        env=helm_env(tmp_path),
        check=False,
    )
    assert out.returncode != 0 and "networkPolicy.metricsFrom needs" in out.stderr, out.stderr


def test_node_maintenance_values(tmp_path: Path) -> None:
    objs = by_key(template(tmp_path))
    container = objs["Deployment", "daemonjob-controller", NAMESPACE]["spec"]["template"]["spec"]["containers"][0]
    assert not any(a.startswith("--node-maintenance-namespaces") for a in container["args"])
    assert not any(k[1] == "daemonjob-node-maintenance" for k in objs)  # off by default: no Node writes
    objs = by_key(
        template(
            tmp_path,
            "-n",
            "ops-system",
            "--set",
            "nodeMaintenance.enabled=true,nodeMaintenance.namespaces={ops,infra},extraArgs={--workers=8}",
        )
    )
    container = objs["Deployment", "daemonjob-controller", "ops-system"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][-2:] == ["--node-maintenance-namespaces=ops,infra", "--workers=8"]
    role = objs["ClusterRole", "daemonjob-node-maintenance", ""]
    assert {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]} in role["rules"]
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]} in role["rules"]
    binding = objs["ClusterRoleBinding", "daemonjob-node-maintenance", ""]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "daemonjob-controller", "namespace": "ops-system"}
    ]
    out = run(
        "helm",
        "template",
        "daemonjob",
        str(CHART),
        "--set",
        "nodeMaintenance.enabled=true",
        env=helm_env(tmp_path),
        check=False,
    )
    assert out.returncode != 0 and "nodeMaintenance.enabled needs nodeMaintenance.namespaces" in out.stderr, out.stderr


ARGOCD_KEY = "resource.customizations.health.daemonjob.io_DaemonJob"
ARGOCD_HEALTH = MANIFESTS / "argocd" / "health.lua"


def test_argocd_key_names_the_crd_group_and_kind() -> None:
    """Argo CD finds a health check under resource.customizations.health.<group>_<kind>."""
    crd = yaml.safe_load((MANIFESTS / "crd.yaml").read_text())
    assert ARGOCD_KEY == f"resource.customizations.health.{crd['spec']['group']}_{crd['spec']['names']['kind']}"


@HELMS
def test_argocd_health_check_value_adds_only_its_configmap(tmp_path: Path, helm: str) -> None:
    """Off by default; on, the chart adds one ConfigMap carrying manifests/argocd/health.lua under
    the argocd-cm key, the data the kustomize component merges into argocd-cm."""
    base = {key(d) for d in template(tmp_path, helm=helm)}
    objs = {key(d): d for d in template(tmp_path, "--set", "argocd.healthCheck.enabled=true", helm=helm)}
    (added,) = set(objs) - base
    assert added == ("ConfigMap", NAMESPACE, "daemonjob-argocd-health") and base <= set(objs)
    assert objs[added]["data"] == {ARGOCD_KEY: ARGOCD_HEALTH.read_text()}


def test_argocd_component_merges_the_check_into_argocd_cm(tmp_path: Path) -> None:
    """The component, in the kustomization that installs Argo CD (whose install manifests name no
    namespace): the key added to argocd-cm, its other keys and labels kept."""
    argocd = tmp_path / "argocd"
    argocd.mkdir()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-cm", "labels": {"app.kubernetes.io/part-of": "argocd"}},
        "data": {"url": "https://argocd.example.com"},
    }
    (argocd / "install.yaml").write_text(json.dumps(cm))
    (argocd / "kustomization.yaml").write_text(
        json.dumps(
            {
                "namespace": "argocd",
                "resources": ["install.yaml"],
                "components": [os.path.relpath(MANIFESTS / "argocd", argocd)],
            }
        )
    )
    (built,) = docs(run("kubectl", "kustomize", str(argocd)).stdout)
    assert built["metadata"] == {**cm["metadata"], "namespace": "argocd"}
    assert built["data"] == {"url": "https://argocd.example.com", ARGOCD_KEY: ARGOCD_HEALTH.read_text()}
