"""The steps of the decision (`decision/decide.py`), each in its own module.

`inputs` and `reading` (what it reads), `plan` (node by node; `drained` and `canarystate` read
with it), `turns` and `actions` (creates and deletes within the slots), `gating` (what the gates
answer), `conditions`, `condition`, `stalls`, `cachewait` and `status` (what it reports),
`keptplan` (the plan kept across passes), `retries` and `starts` (failed nodes run again, stuck
starts fail). May import `nodework`, `jobs`, `order`, `spec`, `schedule`, `shared`.
"""
