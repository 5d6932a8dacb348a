"""Every default of the controller in one place; flags and constructors read from here."""

from __future__ import annotations

from datetime import timedelta

# API client
USER_AGENT = "daemonjob-controller"
API_REQUEST_TIMEOUT = 30.0  # seconds, per request
API_POOL_SIZE = 32  # HTTP connections kept to the API server
KUBE_API_QPS = 50.0
KUBE_API_BURST = 100
API_CREDENTIALS_RECHECK = 1.0  # seconds between two calls of the credentials' refresh hook

# Watches (client-go reflector)
WATCH_TIMEOUT_MIN = 300  # server-side timeoutSeconds is randomised in [MIN, 2*MIN)
WATCH_READ_SLACK = 30.0  # client read timeout beyond the server-side timeout
WATCH_BACKOFF_INITIAL = 0.8
WATCH_BACKOFF_MAX = 30.0
WATCH_BACKOFF_RESET = 120.0  # a watch healthy this long resets the backoff
LIST_PAGE_SIZE = 500

# Writes guarded by the resourceVersion read (machinery/client/conflicts.py): on 409 Conflict read
# again and retry, client-go's retry.DefaultRetry: 5 attempts ~10 ms apart, +up to 10% jitter.
CONFLICT_RETRY_STEPS = 5
CONFLICT_RETRY_DELAY = 0.01  # seconds before the second attempt
CONFLICT_RETRY_FACTOR = 1.0  # each later sleep this many times the one before
CONFLICT_RETRY_JITTER = 0.1

# Work queue (client-go DefaultControllerRateLimiter)
QUEUE_BASE_DELAY = 0.005
QUEUE_MAX_DELAY = 1000.0
QUEUE_QPS = 10.0
QUEUE_BURST = 100

# Controller
WORKERS = 4
EXPECTATIONS_TTL = 300.0  # seconds, as the DaemonSet controller
# An expectation still pending this long is checked against the API server: cleared when
# the cache already agrees with it, else reported (Reconciling, a metric) and checked again
# every EXPECTATIONS_RECHECK seconds until the TTL.
EXPECTATIONS_DEADLINE = 15.0
EXPECTATIONS_RECHECK = 5.0
# Creates the Job watch has not shown yet, over every DaemonJob, past which new creates are
# held back until it has shown them down to UNSEEN_CREATES_RESUME (then the held DaemonJobs are
# queued again). The DaemonSet controller caps one sync at burstReplicas (250) creates and waits
# for the watch to show them before the next: writes never run far ahead of what the watch
# shows. Here a DaemonJob waits for its own creates the same way, and this bound keeps many
# DaemonJobs together from putting the watch minutes behind (650,000 unseen creates at
# 65,000 nodes x 10 without it); a few seconds of events at the watch's pace, many slow-start
# batches of any one DaemonJob.
MAX_UNSEEN_CREATES = 5000
UNSEEN_CREATES_RESUME = 2500
# Seconds after which the next held DaemonJob is queued again when those woken before it took
# the room (backpressure.py): it moves on even if they create nothing.
HELD_RECHECK = 1.0
# A node's Job seen deleted is remembered this long (seconds) for its next attempt's name; the
# DaemonJob's status records that attempt in the next pass (daemonjob/domain/jobs/attempts.py).
DELETED_JOBS_TTL = 3600.0
# A Job in another namespace carrying a DaemonJob's uid is logged once per Job uid: that many
# remembered, each this long (seconds), so a flood of them is logged (and counted) a bounded number of times.
FOREIGN_JOBS_LOGGED_MAX = 10_000
FOREIGN_JOBS_LOGGED_TTL = 3600.0
SLOW_START_INITIAL_BATCH = 1
RESYNC_INTERVAL = 600.0  # seconds between full re-enqueues (0 disables)
# A DaemonJob's plan is kept across passes and updated node by node; this often (seconds) a
# pass also makes the full plan and compares, counting and repairing any difference.
PLAN_SELF_CHECK_INTERVAL = 300.0
HISTORY_LIMIT = 1
# Bounds of a DaemonJob's spec (the CRD schema says the same of historyLimit): every kept
# run is one Job per node, and the template is copied into every node's Job and pod.
HISTORY_LIMIT_MAX = 10
JOB_TEMPLATE_MAX_BYTES = 128 * 1024  # serialized as JSON
# Items of the spec's lists (the CRD's maxItems, where it says): a longer list is one problem,
# its items not read one by one (a problem each would cost a review hundreds of times its size)
AFTER_MAX = 32  # spec.after
HALT_ON_ALERTS_MAX = 32  # spec.rollout.haltOnAlerts, and labels per matcher
HEALTH_DAEMONSETS_MAX = 64  # spec.healthCheck.daemonSets
# Node annotations the node cache keeps (spec.nodeParameters' fromAnnotation reads them):
# values up to this many characters; longer ones (CSI drivers' JSON) read as absent.
NODE_ANNOTATION_VALUE_MAX = 512
# History cleanup (finished Jobs beyond historyLimit): its own pace, never while a pass is
# creating Jobs, so cleaning up the last run never delays the next one's creates. Half the
# default client QPS: a run's history over 10,000 nodes is gone in under 7 minutes.
HISTORY_DELETE_QPS = 25.0
HISTORY_DELETE_BURST = 25
# deletes of succeeded Jobs whose results are recorded (spec.results.deleteSucceededJobs): one per
# node of a rollout, as many as its creates, so at a pace of their own (still after creates)
RECORDED_DELETE_QPS = 100.0
RECORDED_DELETE_BURST = 100
HISTORY_DELETE_TTL = 600.0  # seconds a sent delete is not queued again while the cache lags (a queued one never is)
HISTORY_DELETE_MAX_PENDING = 1_000_000
# A finished Job beyond historyLimit whose result is not recorded yet (the reports cannot be
# written: the DaemonJobReport CRD missing, RBAC) is held this long (seconds) from the first
# delete refused for it, then deleted anyway (daemonjob_jobs_deleted_unrecorded_total):
# results that cannot be written hold nothing else up. --history-result-wait.
HISTORY_RESULT_WAIT = 600.0
# Job status changes arrive in bursts during a rollout; a DaemonJob is reconciled at most
# once per delay after a Job event (the delaying queue keeps a key once). The delay grows
# with the cost of a decision so that these reconciles take at most 1/FACTOR of a worker.
JOB_EVENT_DELAY = 0.25
JOB_EVENT_DELAY_MAX = 2.0
JOB_EVENT_COST_FACTOR = 10.0
FAILED_NODE_NAMES_MAX = 20
# A Job name held by another owner: its removal sends this controller no event, so look again.
CONFLICT_RECHECK_INTERVAL = 30.0
# Added to the delay until a tick, so the reconcile it wakes finds the tick due (seconds).
SCHEDULE_REQUEUE_SLACK = 0.01

# Prometheus (spec.rollout.haltOnAlerts): its firing alerts are read this often (seconds)
PROMETHEUS_POLL_INTERVAL = 15.0
PROMETHEUS_REQUEST_TIMEOUT = 10.0
# Bytes of /api/v1/alerts read (thousands of alerts); a larger answer halts as an unreadable one
PROMETHEUS_MAX_ANSWER_BYTES = 4 * 1024 * 1024

# Leader election (controller-runtime)
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
LEADER_ELECTION_JITTER = 0.2  # a stand-by retries every RETRY_PERIOD * (1 + [0, JITTER))
LEADER_ELECTION_ID = "daemonjob-controller"
# The Secret in the controller's namespace (the Lease's) holding the key that seals a node turn's
# boot ID and verdict on its Job (controller/runtime/turnseal.py); made by the controller on first start.
TURN_SEAL_SECRET = "daemonjob-turn-seal"
# On SIGTERM, in-flight reconciles get this long before they are abandoned and the Lease is
# released: well inside the lease, so a successor never acts while this process still writes.
GRACEFUL_SHUTDOWN_TIMEOUT = 5.0

# ConfigMaps watched for rerunOnConfigChange: each one is a watch of its own (a thread and a
# connection), so both are capped. A DaemonJob past a cap is Stalled, naming it.
MAX_CONFIGMAP_WATCHES_PER_DAEMONJOB = 100
MAX_CONFIGMAP_WATCHES = 1000
MAX_CONFIGMAP_WATCHES_PER_NAMESPACE = 250  # one namespace's DaemonJobs: a quarter of the controller's

# Messages (the API's bounds: an Event's message is at most 1024 bytes when the API server
# validates it; a condition's has no bound in the CRD, so one is chosen that any status write
# carries: 32 KiB, the size metav1.Condition allows).
EVENT_MESSAGE_MAX_BYTES = 1024
CONDITION_MESSAGE_MAX_BYTES = 32768

# Serving
METRICS_BIND_ADDRESS = ":8080"  # with --metrics-secure=false
METRICS_SECURE_BIND_ADDRESS = ":8443"  # HTTPS, TokenReview + SubjectAccessReview (controller-runtime's default)
METRICS_SECURE = True
METRICS_AUTH_CACHE_TTL = 60.0  # seconds a token's review and access answer are reused
# TokenReviews for tokens not in the cache (a scraper's is, most of the time); beyond, 429 unasked
METRICS_AUTH_REVIEW_QPS = 5.0
METRICS_AUTH_REVIEW_BURST = 20
METRICS_SELF_SIGNED_VALIDITY = 365 * 24 * 3600.0  # the certificate made at start without --metrics-cert-dir
HEALTH_PROBE_BIND_ADDRESS = ":8081"
# Open connections per server (beyond, the longest idle is closed): a TLS connection may hold
# ~1 MiB of buffers (asyncio's and OpenSSL's) while a client stuffs it, a plain one ~0.25 MiB.
# Prometheus and the kubelet use one or two; the API servers one per concurrent review.
METRICS_MAX_CONNECTIONS = 32
HEALTH_MAX_CONNECTIONS = 32
WEBHOOK_MAX_CONNECTIONS = 64
# Admission webhook (controller-runtime's port and cert dir layout: tls.crt, tls.key)
WEBHOOK_BIND_ADDRESS = ":9443"
WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
WEBHOOK_PATH = "/validate-daemonjob"
# What the API server sends: an object and its old version (each at most etcd's 1.5 MiB) and
# the review around them. Memory of the webhook's server: at most WEBHOOK_BODY_BYTES of
# reviews held (read or waiting) plus WEBHOOK_HANDLING_BYTES being parsed and decided, a
# review costing WEBHOOK_MEMORY_PER_BYTE times its size: measured per shape of review
# (testing/costlyreviews.py), parsing JSON of small objects costs ~25 times its size and nothing
# after it may cost more; a review that does not fit is answered 429 unread.
WEBHOOK_MAX_REQUEST_BYTES = 3 * 1024 * 1024 + 512 * 1024
WEBHOOK_BODY_BYTES = 32 * 1024 * 1024
WEBHOOK_MEMORY_PER_BYTE = 32
WEBHOOK_HANDLING_BYTES = 128 * 1024 * 1024
WEBHOOK_CERT_SECRET = "daemonjob-webhook-tls"
WEBHOOK_CONFIGURATION = "daemonjob-validating-webhook"
WEBHOOK_SERVICE = "daemonjob-webhook"
# The ValidatingWebhookConfiguration's timeoutSeconds (--webhook-timeout-seconds): the dry run of
# the node Job and its pod (admission/dryrun.py) keeps WEBHOOK_TIMEOUT_MARGIN short of it, each
# call at most WEBHOOK_DRY_RUN_TIMEOUT, none started with less than WEBHOOK_DRY_RUN_MIN left.
WEBHOOK_TIMEOUT = 5.0
WEBHOOK_TIMEOUT_MARGIN = 1.0
WEBHOOK_DRY_RUN_TIMEOUT = 1.5
WEBHOOK_DRY_RUN_MIN = 0.3
WEBHOOK_ACCESS_REVIEW_TIMEOUT = 2.0  # seconds for each SubjectAccessReview: two fit in the webhook's 5 s
# Its answers are kept this long (seconds): a permission revoked takes effect within it
WEBHOOK_ACCESS_REVIEW_CACHE_TTL = 10.0
WEBHOOK_ACCESS_REVIEW_CACHE_ENTRIES = 1024  # allowed and denied answers each
# SubjectAccessReviews of answers not kept, per client address of the webhook (each API server's
# own, a pod posting reviews its own) and in all; beyond, the review is refused unasked (fail
# closed). Addresses kept: the most recent WEBHOOK_ACCESS_REVIEW_CLIENTS.
WEBHOOK_ACCESS_REVIEW_QPS = 5.0
WEBHOOK_ACCESS_REVIEW_BURST = 20
WEBHOOK_ACCESS_REVIEW_TOTAL_QPS = 20.0
WEBHOOK_ACCESS_REVIEW_TOTAL_BURST = 80
WEBHOOK_ACCESS_REVIEW_CLIENTS = 1024
# Node label and annotation keys any DaemonJob may pass (spec.nodeParameters, --node-parameter-keys,
# comma-separated, exact or prefix/*); other keys only who may get nodes, as the webhook checks
NODE_PARAMETER_KEYS = ""
CA_VALIDITY = 10 * 365 * 24 * 3600.0  # seconds
SERVING_CERT_VALIDITY = 365 * 24 * 3600.0  # seconds
# Renewed when less than this part of its validity remains (cert-controller: 90 days of a year).
CERT_RENEW_FRACTION = 0.25
CERT_CHECK_INTERVAL = 10.0  # seconds between looks at the Secret: how soon every replica serves a renewal
CREATE_CONCURRENCY = 32  # parallel Job creates/deletes within one slow-start batch
# Job creates of one batch sent together on one connection once it has more than CREATE_CONCURRENCY:
# the API server answers them in turn, and each costs the controller about half the CPU it does alone
CREATE_PIPELINE = 8

# Memory
GC_FULL_WALK_INTERVAL = 600.0  # seconds: a full collection walks the frozen objects too (gcpolicy.py)
MALLOC_ARENAS = 2  # glibc malloc arenas (MALLOC_ARENA_MAX overrides)

# Logging
LOG_LEVEL = "info"

# kubectl daemonjob plugin
PLUGIN_LOG_CONCURRENCY = 16  # log requests in flight at once (each is proxied to a kubelet)
PLUGIN_LOG_TIMEOUT = 60.0  # seconds per node's log
PLUGIN_POLL_INTERVAL = 1.0  # seconds between DaemonJob reads while waiting
PLUGIN_PLAIN_PROGRESS_EVERY = 10.0  # seconds between unchanged progress lines off a terminal
PLUGIN_MESSAGE_WIDTH = 60  # termination messages are cut to this in tables (not in -o wide)

# Node maintenance (spec.nodeMaintenance)
DRAIN_TIMEOUT = timedelta(minutes=10)  # spec.nodeMaintenance.drain.timeout when unset
DRAIN_POLL_INTERVAL = 2.0  # seconds between two looks at a node's pods while it drains
# seconds between two looks at a node held for a deleted DaemonJob while its Job still runs there
FINALIZER_RECHECK_INTERVAL = 10.0
# seconds between two looks at the stop on cordons set while node maintenance is removed
CORDON_STOP_RECHECK_INTERVAL = 15.0
NODE_MAINTENANCE_NAMESPACES: tuple[str, ...] = ()  # --node-maintenance-namespaces: none by default
# The cluster's disruption budget (node maintenance): no cordon while this many nodes of the
# cluster are unschedulable or NotReady, whoever did it (a percentage of all nodes, rounded up:
# 1 up to 10 nodes, 2 up to 20, 100 of 1000); and never the last node in service of the
# protected set (an empty selector: none).
MAX_UNAVAILABLE_NODES: int | str = "10%"
PROTECTED_NODE_SELECTOR = "node-role.kubernetes.io/control-plane"
# A cordon the budget refused in the act step (another DaemonJob took the room first): look
# again this soon (seconds), when the status names the gate and the DaemonJob waits for a node.
DISRUPTION_RECHECK = 1.0

# Retries (spec.retry) and stuck starts (spec.startTimeout): the Job controller's own pod
# backoff (10 s doubling, capped at 6 min) is the default, so a retried node waits as a
# retried pod would.
RETRY_BACKOFF = timedelta(seconds=10)
RETRY_MAX_BACKOFF = timedelta(minutes=6)
RETRY_LIMIT_MAX = 10  # each retry is a Job kept in the cluster until the rollout is history
# A node's Job with no running pod this long fails with its pod's reason: long enough for a
# large image's pull, short enough that a pod Pending for good does not hold a slot for hours.
START_TIMEOUT = timedelta(minutes=10)
# A stuck start is confirmed by reading the Job's pods once; a Job already looked at is not
# read again for this long (seconds) while the cache catches up with the mark written on it.
START_CHECK_TTL = 60.0
# Per-node results (daemonjob/domain/results/noderesult.py, daemonjob/controller/results/recorder.py)
RESULT_MESSAGE_BYTES = 4096  # a termination message is kept up to this (the kubelet's own bound)
RESULT_CHUNK_BYTES = 900 * 1024  # results per report object, serialised: under 1 MiB with its metadata
RESULT_APPEND_BYTES = 32 * 1024  # an append leaves a chunk at most this big: each costs the API server the whole object
RESULT_FLUSH_COUNT = 250  # results waiting that make a write at once
RESULT_FLUSH_DELAY = 10.0  # seconds the first result waiting may wait for others
RESULT_FLUSH_IDLE = 1.0  # seconds: sooner when the DaemonJob has no running Job left
RESULT_POD_BATCH = 100  # Jobs whose pods one list asks for (controller-uid in (...))
RESULT_RETRY_DELAY = 5.0  # seconds before a failed batch is tried again
RESULT_YIELD_MAX = 30.0  # seconds writes due may give way to urgent passes (a burst of nodes joining)
RESULT_YIELD_RECHECK = 0.1  # seconds between looks while they give way
RESULT_YIELD_QUIET = 1.0  # seconds without urgent passes that end a burst of them (writes go on)
RESULT_WAKE_DELAY = 1.0  # seconds: a written batch's pass (status.results), unless one comes sooner
RESULT_GROUPS = 5  # outcomes status.results lists, most common first
RESULT_GROUP_NODES = 5  # node names each lists
RESULT_GROUP_MESSAGE = 200  # characters of an outcome's message in status.results
REBOOT_TIMEOUT = timedelta(minutes=15)  # spec.nodeMaintenance.rebootTimeout when unset
HEALTH_TIMEOUT = timedelta(minutes=10)  # spec.healthCheck.timeout when unset
HEALTH_SETTLE = timedelta(seconds=30)  # spec.healthCheck.settle when unset
HEALTH_POLL_INTERVAL = 3.0  # seconds between two reads of a checked node's DaemonSet pods (no pod watch)
