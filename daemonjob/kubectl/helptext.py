"""The plugin's help texts: each command's examples, and the exit statuses every command shares."""

from __future__ import annotations

from daemonjob.kubectl.client import EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_USAGE

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
  kubectl daemonjob status node-setup -l zone=a   # nodes with this label only
  kubectl daemonjob status node-setup -o json | jq '.nodes[] | select(.state=="failed")'
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
  kubectl daemonjob create upgrade --image tool:1.2 -l pool=gpu --max-parallel 10% -- upgrade.sh
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
  kubectl daemonjob list -n ops -l team=storage
""",
    "version": """examples:
  kubectl daemonjob version            # the plugin's, the controller's and the CRD's
  kubectl daemonjob version --client   # the plugin's only, without asking the cluster
""",
}
