"""The plugin's help texts: each command's examples, and the exit statuses every command shares."""

from __future__ import annotations

from daemonjob.kubectl.cluster.client import EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_USAGE

EXIT_STATUS = f"""exit status, the same for every command:
  {EXIT_OK}  done; for status and results: no shown node failed
  {EXIT_ERROR}  an error: no such DaemonJob, no cluster, refused by the API server, a timeout,
     cancelled; plan: the DaemonJob would be refused or Stalled
  {EXIT_USAGE}  a usage error: an unknown command or flag, a bad or missing value, flags that do not go
     together (nothing was sent to the cluster)
  {EXIT_FAILED}  the DaemonJob has failed nodes (status, results) or its rollout or run failed (wait,
     rollout status, run-now --wait)
"""

EXAMPLES = {
    "status": """examples:
  kubectl daemonjob status node-setup             # header and one row per node
  kubectl daemonjob status node-setup --failed    # only failed nodes; exit 3 if any
  kubectl daemonjob status node-setup -o wide     # full messages, pods, revisions
  kubectl daemonjob status node-setup --node-selector zone=a   # nodes with this label only
  kubectl daemonjob status node-setup -o json | jq '.nodes[] | select(.state=="failed")'
  kubectl daemonjob status node-setup --failed -o name          # node/NAME of each failed node
  kubectl daemonjob status node-setup -o custom-columns=NODE:.node,CODE:.exit_code --no-headers
""",
    "results": """examples:
  kubectl daemonjob results node-audit                        # every node's recorded result
  kubectl daemonjob results node-audit --group-by             # nodes grouped by exit code and message
  kubectl daemonjob results node-audit --group-by .kernel     # grouped by a field of a JSON message
  kubectl daemonjob results node-audit --failed -o csv > failed.csv
  kubectl daemonjob results node-audit --revision 5f9c2d1e0a  # an earlier revision still kept
""",
    "wait": """examples:
  kubectl daemonjob wait node-setup --timeout 10m   # exit 0 Complete, 3 Failed, 1 timeout
  kubectl daemonjob rollout status node-setup       # the same, in kubectl rollout's words
""",
    "logs": """examples:
  kubectl daemonjob logs node-setup                       # every node's output, [node] prefixed
  kubectl daemonjob logs node-setup --failed --tail 20    # the last words of failed nodes
  kubectl daemonjob logs node-setup --output-dir out/     # out/<node>.log, one file per node
  kubectl daemonjob logs node-setup --node node-07 -c setup
""",
    "rerun": """examples:
  kubectl daemonjob rerun node-setup --all             # every node again (a new revision)
  kubectl daemonjob rerun node-setup --failed --yes    # only the nodes that failed
  kubectl daemonjob rerun node-setup --node node-03 --node node-07
""",
    "pause": """examples:
  kubectl daemonjob pause node-setup     # no new node starts; running Jobs finish, ticks are skipped
  kubectl daemonjob resume node-setup
""",
    "resume": """examples:
  kubectl daemonjob resume node-setup    # the rollout goes on where it stopped
""",
    "promote": """examples:
  kubectl daemonjob promote node-setup   # the canaried revision (or run) goes on to every node
""",
    "release": """examples:
  kubectl daemonjob release node-setup --node node-07            # uncordon a failed node kept cordoned
  kubectl daemonjob release node-setup --node node-03,node-07 --dry-run
  kubectl daemonjob release node-setup --all                     # every node it keeps cordoned
""",
    "run-now": """examples:
  kubectl daemonjob run-now nightly-cleanup                       # one run now on every eligible node
  kubectl daemonjob run-now nightly-cleanup --wait --timeout 30m  # and follow it: exit 0, 3 failed, 1 timeout
""",
    "create": """examples:
  kubectl daemonjob create collect-dmesg --image busybox:1.36 -- sh -c 'dmesg | tail'
  kubectl daemonjob create upgrade --image tool:1.2 --node-selector pool=gpu --max-parallel 10% -- upgrade.sh
  kubectl daemonjob create nightly --image tool:1.2 --schedule '0 3 * * *' --time-zone Europe/Berlin -- cleanup
  kubectl daemonjob create x --image busybox:1.36 --dry-run=client -o yaml -- true
  kubectl daemonjob create fw --image tool:1.2 --drain --max-parallel 1 -- update-firmware
""",
    "plan": """examples:
  kubectl daemonjob plan -f node-setup.yaml        # before kubectl apply: nodes, order, waves, gates
  kubectl daemonjob plan node-setup                # the applied one, on the cluster as it is now
  kubectl daemonjob plan -f node-setup.yaml -o json | jq '.waves[0]'
""",
    "list": """examples:
  kubectl daemonjob list -A
  kubectl daemonjob list -n ops -l team=storage   # -l selects the DaemonJobs listed
  kubectl daemonjob list -A -o jsonpath='{range .items[*]}{.metadata.name}{"\\t"}{.status.failedNodes}{"\\n"}{end}'
""",
    "version": """examples:
  kubectl daemonjob version            # the plugin's, the controller's and the CRD's
  kubectl daemonjob version --client   # the plugin's only, without asking the cluster
""",
}

# What each command's --help says below its one-line summary; the command table of docs/guides/kubectl.md is
# made of these and the usage lines (commandtable.py), so the two cannot drift apart.
DETAILS = {
    "status": """The rollout in words, then NODE, STATE (pending, active, succeeded, failed,
terminating, ineligible: cordoned, tainted, NotReady, not selected), JOB, ATTEMPT, STARTED,
DURATION, EXIT CODE, REASON (Error, OOMKilled, BackoffLimitExceeded, DeadlineExceeded,
ImagePullBackOff...) and MESSAGE (the termination message, shortened; in full with -o wide). Nodes
the DaemonJob does not select are counted, and listed with --all-nodes. With --node-selector the
counts line (and `counts` in -o json) is of the matching nodes only, the same nodes as the rows; the
conditions stay the DaemonJob's own. The counts add up: desired is pending + active + succeeded +
failed + terminating. -o name prints node/NAME per shown node; custom-columns take the fields of
-o json's `nodes` (.node, .state, .exit_code...); --no-headers prints the rows alone. -l is a
deprecated alias of --node-selector for one release. Exit 3 when a shown node failed.""",
    "results": """Every node's recorded result (DaemonJobReports) from one list of the rollout's reports,
after the pods, Jobs and nodes are gone: NODE, STATE, EXIT CODE, REASON, DURATION, FINISHED,
MESSAGE. --group-by counts nodes per outcome (exit code and message, or a field of a JSON message,
.kernel or .a.b), most common first with a few node names each; --revision/--run reads an earlier
rollout still kept; -o csv has every field and the whole message; -o name prints node/NAME per
node; custom-columns take the fields of each result (of each group with --group-by). A retried
node shows its latest attempt. Exit 3 when a shown node failed. Without the DaemonJobReport CRD it
says so and names the command that installs it, exit 1.""",
    "wait": """A progress bar (nodes done of desired, failed, pace, time left) on a terminal, a line per
change otherwise; exit 0 Complete, 3 Failed (or Stalled), 1 timeout.""",
    "logs": """Every node's output, fetched concurrently (--max-concurrent), lines prefixed [node]; a node
whose pod or log is gone is named on stderr and the rest still print. -l is a deprecated alias of
--node-selector for one release.""",
    "rerun": """--all: every node again, by stamping daemonjob.io/rerun-at on the Job template (a new
revision, like kubectl rollout restart); --failed/--node: deletes those nodes' Jobs of the current
revision so the controller runs them again, each under its next attempt's name. Asks first on a
terminal (--yes: not). Without --failed, --node or --all it asks on a terminal whether to re-run
every node, and elsewhere refuses with a usage error (exit 2).""",
    "pause": """As kubectl rollout pause: no new node Job starts (running ones finish) and ticks are
skipped; prints daemonjob.daemonjob.io/NAME paused, and an error (exit 1) when it already is.""",
    "resume": """As kubectl rollout resume; prints daemonjob.daemonjob.io/NAME resumed, and an error (exit 1)
when it is not paused.""",
    "promote": """For spec.rollout.canary: writes the daemonjob.io/promote annotation naming
status.currentRun, or status.currentRevision without runs; prints daemonjob.daemonjob.io/NAME
promoted (daemonjob.io/promote=VALUE).""",
    "release": """For keepFailedCordoned (see docs/guides/node-maintenance.md): writes the daemonjob.io/release
annotation naming each node with the cordon it ends, and the controller uncordons them; prints
node/N release requested (daemonjob.daemonjob.io/NAME). An unknown node, a node without this
DaemonJob's record, and a node held for a Job that has not failed are refused by name, exit 1, and
nothing is written. --all: every node it keeps cordoned.""",
    "run-now": """Writes the daemonjob.io/run-now annotation (the time in UTC); --wait follows that run (not
the one before it) to its end: exit 0 succeeded, 3 failed or replaced by a later run, 1 timeout.""",
    "create": """Checked with the controller's own rules (selector, maxParallel, the cron parser and time
zone) before it is sent. --node-selector sets spec.nodeSelector; --cordon sets
spec.nodeMaintenance.cordon, --drain also drain: {} (its defaults), which the webhook admits only
from who may cordon and drain nodes. -o name prints daemonjob.daemonjob.io/NAME; json, yaml and
jsonpath show the object created (with --dry-run=client, the one that would be). Settings that
do nothing as combined are warned of on stderr (Warning: ...), as kubectl prints the webhook's. -l
is a deprecated alias of --node-selector for one release.""",
    "plan": """On the cluster as it is now, before you apply it (-f, - for stdin) or for one applied (NAME):
revision, eligible nodes and why not, order, waves, gates, drains (see docs/guides/kubectl.md).
custom-columns take the fields of -o json's `nodes` (.name, .state, .wave, .why); --no-headers
prints the rows alone. Settings that do nothing as combined are warned of on stderr (and listed
under `warnings` in -o json). Exit 1 when it would be refused or Stalled.""",
    "list": """NAME, REVISION, DESIRED, SUCCEEDED, FAILED, ACTIVE, PENDING, STATUS, AGE (and NAMESPACE with
-A); -o wide adds RUN, SCHEDULE, SUSPENDED and MAX PARALLEL. -l selects the DaemonJobs listed.
-o name prints daemonjob.daemonjob.io/NAME; json, yaml and jsonpath show a v1 List; custom-columns
take the fields of each DaemonJob (.metadata.name, .status.failedNodes...).""",
    "version": """Plugin Version, then, when a cluster answers, Controller Version of each Deployment labelled
app.kubernetes.io/name=daemonjob-controller and CRD Version (its served and storage versions).
What cannot be read is said on stderr; exit 0 all the same. --client: the plugin's version only.""",
}
DETAILS["rollout status"] = DETAILS["wait"]
