"""The RBAC of the controller's users in the local control plane: manifests/rbac.yaml, its
roles bound as well to the group of the static-token users that tests run controllers as."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CONTROLLER_NAMESPACE", "CONTROLLER_USERS_GROUP", "grant_controller_role"]

# Static-token users of ClusterOptions.users are in this group, which is bound to the
# controller's own ClusterRole and leader-election Role (manifests/rbac.yaml).
CONTROLLER_USERS_GROUP = "daemonjob:controllers"
CONTROLLER_NAMESPACE = "daemonjob-system"


def grant_controller_role(kubectl: Sequence[str], manifests: Sequence[Path]) -> None:
    """`manifests` (the namespace and manifests/rbac.yaml) applied, with the roles bound to
    CONTROLLER_USERS_GROUP as well."""
    bindings = f"""\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: daemonjob-controller-users}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: daemonjob-controller}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: daemonjob-leader-election-users, namespace: {CONTROLLER_NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: daemonjob-leader-election}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: daemonjob-webhook-configuration-users}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: daemonjob-webhook-configuration}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: daemonjob-webhook-access-review-users}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: daemonjob-webhook-access-review}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: daemonjob-webhook-dry-run-users}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: daemonjob-webhook-dry-run}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: daemonjob-turn-seal-users, namespace: {CONTROLLER_NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: daemonjob-turn-seal}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: daemonjob-webhook-certificates-users, namespace: {CONTROLLER_NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: daemonjob-webhook-certificates}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
---
# The shipped Role allows only the Lease named daemonjob-controller; tests elect on a Lease
# of their own (--leader-election-id), so these users may get and update any in the namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: daemonjob-test-leases, namespace: {CONTROLLER_NAMESPACE}}}
rules: [{{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, update]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: daemonjob-test-leases, namespace: {CONTROLLER_NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: daemonjob-test-leases}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "{CONTROLLER_USERS_GROUP}"}}]
"""
    for source, stdin in [*((m, None) for m in manifests), ("-", bindings)]:
        out = subprocess.run(
            [*kubectl, "apply", "-f", str(source)],
            input=stdin,
            text=True,
            capture_output=True,
            check=False,
            timeout=60,
        )
        if out.returncode != 0:
            raise RuntimeError(f"kubectl apply -f {source} failed: {out.stderr.strip()}")
