"""The DaemonJob controller: wiring, acting on decisions and reporting.

Sub-packages, top to bottom (pyproject.toml's contract): `wiring` (the Controller, its threads,
event routing), `nodework` (node maintenance's act side), `results` (the result recorder),
`passes` (a pass's steps: observe, adopt, act, report), `metrics` and `order` (side by side),
`runtime` (the caches, the writers, what is kept between passes). It sits on the domain and the
machinery; nothing below imports it.
"""
