"""kubectl's global flags, applied as kubectl applies them, through the Kubernetes client's own loader.

kubectl reads --cluster, --user, --server, --token, the certificate flags and
--insecure-skip-tls-verify as overrides of the context in use (client-go's ConfigOverrides).
Here the context's cluster and user entries, changed by the flags, are handed to the client's
KubeConfigLoader as one more context of the merged kubeconfig (never written back), so exec
plugins, auth providers, token files and relative paths (against their own kubeconfig file)
are read as they always are. --as and --as-group become the impersonation headers (the
client's Configuration has no field for them); --request-timeout bounds each request.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from typing import Any

from kubernetes import config as k8s_config
from kubernetes.client import Configuration
from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger

from daemonjob.kubectl.formats.timefmt import parse_duration
from daemonjob.machinery.client.kube import ConfigError, Kube

FLAGS_ENTRY = "kubectl-daemonjob/flags"  # the name of the context, cluster and user made from the flags


@dataclass(frozen=True)
class Connection:
    """Where and as whom to connect: kubectl's global flags, None where not given."""

    kubeconfig: str | None = None
    context: str | None = None
    cluster: str | None = None
    user: str | None = None
    server: str | None = None
    token: str | None = None
    certificate_authority: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    insecure_skip_tls_verify: bool = False
    impersonate: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    request_timeout: float | None = None  # seconds; None or 0: the client's default

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Connection:
        values: dict[str, Any] = {f.name: getattr(args, f.name, None) for f in fields(cls)}
        values["impersonate_groups"] = tuple(values["impersonate_groups"] or ())
        values["insecure_skip_tls_verify"] = bool(values["insecure_skip_tls_verify"])
        return cls(**values)

    def headers(self) -> tuple[tuple[str, str], ...]:
        if not self.impersonate:
            return ()
        return (("Impersonate-User", self.impersonate),) + tuple(
            ("Impersonate-Group", g) for g in self.impersonate_groups
        )


def _timeout(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_flags(parser: argparse.ArgumentParser, top: bool) -> None:
    """kubectl's global flags, accepted before and after the command (later ones win)."""
    d: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    add = parser.add_argument
    add("-n", "--namespace", help="the namespace (default: the context's, else default)", **d)
    add(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="look in every namespace (for NAME: the one namespace holding it)",
        **d,
    )
    add("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)", **d)
    add("--context", help="the kubeconfig context to use (default: its current-context)", **d)
    add("--cluster", help="the kubeconfig cluster to use (default: the context's)", **d)
    add("--user", help="the kubeconfig user to use (default: the context's)", **d)
    add("-s", "--server", help="the address of the API server (default: the cluster's)", **d)
    add("--token", help="bearer token to authenticate with (default: the user's credentials)", **d)
    add("--certificate-authority", metavar="FILE", help="CA certificate file (default: the cluster's)", **d)
    add("--client-certificate", metavar="FILE", help="client certificate file for TLS (default: the user's)", **d)
    add("--client-key", metavar="FILE", help="client key file for TLS (default: the user's)", **d)
    add(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not check the server's certificate (insecure; default: the cluster's setting)",
        **d,
    )
    add("--as", dest="impersonate", metavar="USER", help="act as this user (impersonation)", **d)
    add(
        "--as-group",
        dest="impersonate_groups",
        action="append",
        metavar="GROUP",
        help="act as a member of this group (repeat; needs --as)",
        **d,
    )
    add(
        "--request-timeout",
        type=_timeout,
        metavar="DURATION",
        help="give up on a single request after this long (e.g. 10s, 1m; default and 0: 30s)",
        **d,
    )


def _default_kubeconfig() -> str:
    return os.environ.get("KUBECONFIG") or "~/.kube/config"


def _entry(config: ConfigNode, kind: str, name: str | None) -> ConfigNode | None:
    if not name or not config.safe_get(kind):
        return None
    return config[kind].get_with_name(name, safe=True)


def _overridden(conn: Connection, config: ConfigNode) -> None:
    """Add the context, cluster and user of the flags to the merged kubeconfig `config`."""
    context_name = conn.context or config.safe_get("current-context")
    if context_name:
        context = dict(config["contexts"].get_with_name(context_name).value.get("context") or {})
    elif conn.server:
        context = {}
    else:
        raise ConfigError("no context chosen: the kubeconfig has no current-context (use --context or --server)")
    cluster_name = conn.cluster or context.get("cluster")
    cluster_node = _entry(config, "clusters", cluster_name)
    if cluster_node is None and not conn.server:
        raise ConfigError(f'cluster "{cluster_name}" is not in the kubeconfig (use --cluster or --server)')
    cluster = dict((cluster_node.value.get("cluster") if cluster_node else None) or {})
    if conn.server:
        cluster["server"] = conn.server
    if conn.certificate_authority:  # as client-go: a CA file replaces the kubeconfig's CA data
        cluster.pop("certificate-authority-data", None)
        cluster["certificate-authority"] = os.path.abspath(conn.certificate_authority)
    if conn.insecure_skip_tls_verify:  # and skipping verification drops every CA
        cluster.pop("certificate-authority-data", None)
        cluster.pop("certificate-authority", None)
        cluster["insecure-skip-tls-verify"] = True
    user_node = _entry(config, "users", conn.user or context.get("user"))
    user = dict((user_node.value.get("user") if user_node else None) or {})
    if conn.token:  # the token is who we are: no provider, exec plugin or password is asked
        for key in ("tokenFile", "auth-provider", "exec", "username", "password"):
            user.pop(key, None)
        user["token"] = conn.token
    for flag, key in ((conn.client_certificate, "client-certificate"), (conn.client_key, "client-key")):
        if flag:
            user.pop(f"{key}-data", None)
            user[key] = os.path.abspath(flag)
    # Relative paths in an entry resolve against the file it came from: the new entries keep it.
    for kind, key, value, node in (
        ("clusters", "cluster", cluster, cluster_node),
        ("users", "user", user, user_node),
        ("contexts", "context", {**context, "cluster": FLAGS_ENTRY, "user": FLAGS_ENTRY}, None),
    ):
        entry = {"name": FLAGS_ENTRY, key: value}
        config.value.setdefault(kind, []).append(ConfigNode(f"{kind}[name={FLAGS_ENTRY}]", entry, node and node.path))


def configuration(conn: Connection) -> Configuration:
    """The client's Configuration: the kubeconfig's (--kubeconfig, else KUBECONFIG or
    ~/.kube/config; in a pod without --kubeconfig its service account) with the flags applied."""
    cfg = Configuration()
    try:
        if conn.kubeconfig and not os.path.exists(conn.kubeconfig):
            raise ConfigError(f"kubeconfig {conn.kubeconfig} does not exist")
        if not conn.kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)
            _over_in_cluster(conn, cfg)
            return cfg
        merger = KubeConfigMerger(conn.kubeconfig or _default_kubeconfig())
        config = merger.config
        if config is None:
            if not conn.server:
                raise ConfigError("no kubeconfig found ($KUBECONFIG, ~/.kube/config) and no --server given")
            config = ConfigNode("flags", {"clusters": [], "users": [], "contexts": []})
        _overridden(conn, config)
        loader = KubeConfigLoader(
            config_dict=config,
            active_context=FLAGS_ENTRY,
            config_base_path=None,
            config_persister=merger.save_changes if merger.paths else None,  # refreshed tokens, as kubectl
        )
        loader.load_and_set(cfg)
    except ConfigError:
        raise
    except Exception as exc:  # the client raises several unrelated types here
        raise ConfigError(f"cannot load Kubernetes credentials: {exc}") from exc
    return cfg


def _over_in_cluster(conn: Connection, cfg: Configuration) -> None:
    """The flags over the service account's configuration (no kubeconfig to merge them into)."""
    if conn.server:
        cfg.host = conn.server.rstrip("/")
    if conn.token:
        cfg.api_key = {"BearerToken": f"Bearer {conn.token}"}
        cfg.refresh_api_key_hook = None
    if conn.certificate_authority:
        cfg.ssl_ca_cert = os.path.abspath(conn.certificate_authority)
    if conn.insecure_skip_tls_verify:
        cfg.verify_ssl = False
    if conn.client_certificate:
        cfg.cert_file = os.path.abspath(conn.client_certificate)
    if conn.client_key:
        cfg.key_file = os.path.abspath(conn.client_key)


def connect(conn: Connection) -> Kube:
    kube = Kube(configuration(conn), extra_headers=conn.headers())
    if conn.request_timeout:
        kube.timeout = conn.request_timeout
    return kube
