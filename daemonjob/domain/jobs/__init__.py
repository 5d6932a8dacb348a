"""The Jobs a DaemonJob owns: the contract (what a Job is read by: its node, revision, run and
state), whose a Job is (`owners`), the Job built for a node (`jobbody`), the creates and deletes
a decision asks for (`changes`), the view a decision reads of one Job (`jobview`), a checked
turn's verdict on its Job (`turnverdict`), a recorded success standing in for a deleted Job
(`standins`), and attempts (a re-created Job's new name).

May import `spec`, `order`, `schedule` and `shared`.
"""
