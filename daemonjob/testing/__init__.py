"""A local Kubernetes control plane with simulated nodes, for testing DaemonJobs without a cluster.

Ships with the package, the way envtest ships inside controller-runtime:

- `python -m daemonjob.testing up --nodes 3` / `down`: a background cluster (etcd,
  kube-apiserver, kube-controller-manager, kube-scheduler) with the DaemonJob CRD installed
  and simulated nodes; the binaries are provisioned on first use (see `cluster.py`).
- `LocalCluster`, `SimKubelet`: the same in-process.
- a pytest plugin (`pip install daemonjob[testing]`): fixtures `cluster`, `kube`, `kubelet`,
  `namespace`, `make_nodes`, `installed_crd`.
- `doubles`: fakes of the informers and writes, and the act layer's harness, for unit tests;
  `sim`: the simulated kubelet and Job controller.
- `webhook`: a validating admission webhook on loopback, registered with the local API
  server, for tests of writes that admission refuses.

The top layer: may import every other package; none of them imports it.
"""
