"""Node work: spec.nodeMaintenance's cordon, drain and uncordon (the Node writes, the step that
decides them, drain timeouts), the node's checked turn (reboot and health check), releases, and
the cluster's budget of nodes out of service. The records kept on Nodes are `shared`'s.

May import `jobs`, `order`, `spec`, `schedule`, `shared`.
"""
