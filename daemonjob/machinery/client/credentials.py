"""Credentials: the client Configuration from a kubeconfig or the pod, and the headers made from it."""

from __future__ import annotations

import os

from kubernetes import config as k8s_config
from kubernetes.client import Configuration
from urllib3 import HTTPHeaderDict

from daemonjob import defaults

# A dict, or with headers that repeat (Impersonate-Group), urllib3's multi-valued mapping.
Headers = dict[str, str] | HTTPHeaderDict


class ConfigError(Exception):
    """No usable credentials: said in one line by the entry point."""


def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> Configuration:
    """kubeconfig if named, else in-cluster, else ~/.kube/config (KUBECONFIG honoured)."""
    cfg = Configuration()
    try:
        if kubeconfig:
            if not os.path.exists(kubeconfig):
                raise ConfigError(f"kubeconfig {kubeconfig} does not exist")
            k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)
        else:
            k8s_config.load_kube_config(context=context, client_configuration=cfg)
    except ConfigError:
        raise
    except Exception as exc:  # the client raises several unrelated types here
        raise ConfigError(f"cannot load Kubernetes credentials: {exc}") from exc
    return cfg


def request_headers(cfg: Configuration, extra: tuple[tuple[str, str], ...]) -> Headers:
    """Accept, User-Agent, the credentials (running the Configuration's refresh hook) and `extra`."""
    headers: Headers = {"Accept": "application/json", "User-Agent": defaults.USER_AGENT}
    token = cfg.get_api_key_with_prefix("authorization", alias="BearerToken")  # runs the hook
    if token:
        headers["Authorization"] = token
    if extra:
        headers = HTTPHeaderDict(headers)
        for name, value in extra:
            headers.add(name, value)
    return headers
