"""The pure domain: what a DaemonJob means, with no I/O.

One sub-package per capability, layered (pyproject.toml's contract, top to bottom): `preview`
(what `kubectl daemonjob plan` shows), `decision` (`decide(DecisionInput) -> Decision`), `gates`
(what holds new nodes back), `results`, `rollout` (the decision's steps), `nodework` (cordon, drain,
checked turns), `jobs` (the Job contract), `order`, `spec` (the typed spec and its rule book),
`schedule`, `shared`. It imports the standard library, `defaults` and the machinery's pure
helpers, never a client: every rule is a plain unit test.
"""
