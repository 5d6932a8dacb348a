"""Node work: spec.nodeMaintenance's cordon, drain and uncordon, the node's checked turn
(reboot and health check), the records kept on Nodes, releases, and the cluster's budget of
nodes out of service.

May import `jobs`, `order`, `spec`, `schedule`, `shared`.
"""
