"""`plan`'s words: the revision, the verdict, the gates and waves, then one row per node."""

from __future__ import annotations

import sys
from typing import TextIO

from daemonjob.domain.preview.report import SKIPPED, NodeLine, Preview
from daemonjob.kubectl.formats import output

HEADERS = ("NODE", "STATE", "WAVE", "WHY", "DETAIL")
WAVES_SHOWN = 10  # waves listed by their nodes; the rest are counted
NODES_PER_WAVE_SHOWN = 12


def _names(nodes: list[str], most: int = NODES_PER_WAVE_SHOWN) -> str:
    shown = ", ".join(nodes[:most])
    return shown + (f" (+{len(nodes) - most} more)" if len(nodes) > most else "")


def header_lines(plan: Preview, refused: list[str]) -> list[str]:
    lines = [f"DaemonJob {plan.namespace}/{plan.name}"]
    if plan.new_revision:
        was = f", replacing {plan.previous}" if plan.previous else ""
        reruns = f"; re-runs {len(plan.reruns)} node(s) that ran an earlier one" if plan.reruns else ""
        lines.append(f"Revision:   {plan.revision} (new{was}){reruns}")
    else:
        lines.append(f"Revision:   {plan.revision} (unchanged: no node runs it again)")
    for message in refused:
        lines.append(f"Refused:    {message}")
    stalled = plan.stalled
    if stalled is not None:
        lines.append(f"Stalled:    {stalled.get('reason')}: {stalled.get('message')}")
    eligible = [n for n in plan.nodes if n.state != SKIPPED]
    limit = f"maxParallel {plan.slots}" if plan.slots is not None else "no maxParallel"
    lines.append(
        f"Nodes:      {len(eligible)} of {len(plan.nodes)} eligible; {len(plan.order)} to run, "
        f"{limit}, {len(plan.waves)} wave(s)"
    )
    if plan.canary_count:
        lines.append(f"Canary:     {plan.canary_count} node(s) first: {_names(plan.canary) or 'none yet'}")
    window = plan.window
    if window is not None:
        when = f"; closes at {window.closes_at}" if window.open else f"; next opens at {window.opens_at or 'never'}"
        state = "open" if window.open else "closed"
        lines.append(f"Window:     {window.expression!r} in {window.zone}, {state}{when}")
    for gate in plan.gates:
        held = f" [{_names(list(gate.nodes))}]" if gate.nodes else ""
        message = gate.message
        if gate.gate == "canary" and "first: ;" in message:  # said before any canary node started
            message = f"the other nodes wait for the canary on {_names(plan.canary)}, then for a promote"
        lines.append(f"Held by:    {gate.gate} ({gate.reason}): {message}{held}")
    if plan.waves and not plan.starting:
        reconciling = next((c for c in plan.conditions if c.get("type") == "Reconciling"), None)
        why = f" ({reconciling.get('reason')}: {reconciling.get('message')})" if reconciling is not None else ""
        lines.append(f"Now:        no node starts yet{why}; the waves follow once that lets go")
    for i, wave in enumerate(plan.waves[:WAVES_SHOWN], 1):
        after = " (after: kubectl daemonjob promote)" if i == plan.promote_before else ""
        lines.append(f"Wave {i}:{' ' * max(1, 6 - len(str(i)))}{_names(wave)}{after}")
    if len(plan.waves) > WAVES_SHOWN:
        lines.append(f"            ... {len(plan.waves) - WAVES_SHOWN} more wave(s)")
    return lines


def _detail(line: NodeLine) -> str:
    parts = []
    if line.canary:
        parts.append("canary")
    if line.evict:
        parts.append(f"evicts {', '.join(line.evict)}")
    for pod, why in line.refused.items():
        parts.append(f"{pod} refused now: {why}")
    parts.extend(line.blocked)
    if line.message:
        parts.append(line.message)
    return "; ".join(parts)


def show(plan: Preview, refused: list[str], stream: TextIO | None = None, no_headers: bool = False) -> None:
    """The header lines, then a row per node; `no_headers`: the rows alone."""
    stream = stream or sys.stdout
    rows = [(n.name, n.state, str(n.wave) if n.wave is not None else "", n.why or "", _detail(n)) for n in plan.nodes]
    if no_headers:
        if rows:
            output.print_table(HEADERS, rows, state_column=1, stream=stream, no_headers=True)
        return
    stream.write("\n".join(header_lines(plan, refused)) + "\n\n")
    if rows:
        output.print_table(HEADERS, rows, state_column=1, stream=stream)
    else:
        stream.write("No nodes.\n")
