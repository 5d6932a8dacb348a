"""The Jobs a DaemonJob owns: the contract (labels, annotations, names, the Job built for a
node), the view a decision reads of one Job, and attempts (a re-created Job's new name).

May import `spec`, `order`, `schedule` and `shared`.
"""
