{{/* Labels Helm adds to every object, beside the ones manifests/ sets. */}}
{{- define "daemonjob.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Objects of the controller (ServiceAccount, RBAC). */}}
{{- define "daemonjob.rbacLabels" -}}
app.kubernetes.io/name: daemonjob
app.kubernetes.io/component: controller
{{ include "daemonjob.helmLabels" . }}
{{- end -}}

{{- define "daemonjob.selectorLabels" -}}
app.kubernetes.io/name: daemonjob-controller
{{- end -}}

{{- define "daemonjob.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The metrics port: metrics.port, else 8443 (HTTPS) or 8080 (plain HTTP). */}}
{{- define "daemonjob.metricsPort" -}}
{{- if .Values.metrics.port -}}
{{ .Values.metrics.port }}
{{- else if .Values.metrics.secure -}}
8443
{{- else -}}
8080
{{- end -}}
{{- end -}}

{{/* Non-empty when cert-manager provides the webhook's certificate. */}}
{{- define "daemonjob.certManager" -}}
{{- if and .Values.webhook.enabled .Values.webhook.certManager.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* Objects of the admission webhook (Secret, Service, configuration). */}}
{{- define "daemonjob.webhookLabels" -}}
app.kubernetes.io/name: daemonjob-controller
app.kubernetes.io/component: webhook
app.kubernetes.io/part-of: daemonjob
{{ include "daemonjob.helmLabels" . }}
{{- end -}}

{{/* Non-empty when the hook Job release-nodes is rendered: node maintenance is on, or is being
turned off (its ClusterRoleBinding still exists; `helm template` cannot look it up). */}}
{{- define "daemonjob.releaseHook" -}}
{{- if or .Values.nodeMaintenance.enabled (lookup "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" "" "daemonjob-node-maintenance") -}}
true
{{- end -}}
{{- end -}}
