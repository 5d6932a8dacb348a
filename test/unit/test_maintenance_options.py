"""The controller's node-maintenance settings as one value: the flags fill it as the defaults
say, a namespaced controller sweeps its own namespace, and the controller wires each part."""

from __future__ import annotations

from daemonjob import cli, defaults
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.wiring.controller import Controller
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.fakes import FakeJobControl, fake_informers
from daemonjob.testing.doubles.nodefakes import FakeNodeControl


def _stopped() -> str | None:
    return "being removed"


def test_the_flags_fill_the_options_as_the_defaults_say() -> None:
    unset = NodeMaintenanceOptions.from_flags(cli.parser().parse_args([]), _stopped)
    assert unset == NodeMaintenanceOptions(cordons_stopped=_stopped)
    assert (unset.namespaces, unset.max_unavailable_nodes, unset.protected_node_selector) == (
        frozenset(defaults.NODE_MAINTENANCE_NAMESPACES),
        defaults.MAX_UNAVAILABLE_NODES,
        defaults.PROTECTED_NODE_SELECTOR,
    )
    args = cli.parser().parse_args(
        ["--node-maintenance-namespaces=ops,infra", "--max-unavailable-nodes=3", "--protected-node-selector="]
    )
    given = NodeMaintenanceOptions.from_flags(args, _stopped)
    assert (given.namespaces, given.max_unavailable_nodes, given.protected_node_selector) == (
        frozenset({"ops", "infra"}),
        3,
        "",
    )
    assert NodeMaintenanceOptions().cordons_stopped() is None  # nothing stops cordons unless asked


def test_a_namespaced_controller_sweeps_its_own_namespace_unless_told_otherwise() -> None:
    assert NodeMaintenanceOptions().swept_in("ops").sweep_namespace == "ops"
    assert NodeMaintenanceOptions().swept_in(None).sweep_namespace is None
    assert NodeMaintenanceOptions(sweep_namespace="infra").swept_in("ops").sweep_namespace == "infra"


def test_the_controller_wires_each_setting_where_it_is_read() -> None:
    options = NodeMaintenanceOptions(
        frozenset({"ops"}),
        max_unavailable_nodes=2,
        protected_node_selector="",
        sweep_namespace="ops",
        cordons_stopped=_stopped,
    )
    ctl = Controller(
        fake_informers(),
        FakeJobControl(),
        clock=FakeClock(),
        resync_interval=0,
        node_control=FakeNodeControl(),
        node_maintenance=options,
    )
    try:
        assert ctl.maintenance.namespaces == frozenset({"ops"})
        assert ctl.maintenance.node_acts is not None and ctl.maintenance.node_acts.cordons_stopped is _stopped
        assert ctl.disruption.max_unavailable == 2 and ctl.disruption.protected is None
        assert ctl.orphans is not None and ctl.orphans.namespace == "ops"
    finally:
        ctl.stop(timeout=1)
    bare = Controller(fake_informers(), FakeJobControl(), clock=FakeClock(), resync_interval=0)
    try:
        assert bare.maintenance.namespaces == frozenset() and bare.orphans is None
        assert bare.disruption.max_unavailable == defaults.MAX_UNAVAILABLE_NODES
    finally:
        bare.stop(timeout=1)
