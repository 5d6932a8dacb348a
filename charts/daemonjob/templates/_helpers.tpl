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
