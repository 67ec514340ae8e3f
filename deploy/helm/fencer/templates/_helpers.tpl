{{- define "fencer.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fencer.headless" -}}
{{- printf "%s-peers" (include "fencer.fullname" .) -}}
{{- end -}}

{{- define "fencer.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fencer.labels" -}}
{{ include "fencer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The client addresses of every server, by their stable names. */}}
{{- define "fencer.join" -}}
{{- $full := include "fencer.fullname" . -}}
{{- $headless := include "fencer.headless" . -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc:%d" $full $i $headless $.Release.Namespace (int $.Values.ports.resp)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}
