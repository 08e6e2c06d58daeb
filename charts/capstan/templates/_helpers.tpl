{{/* The Capstan version: the image tag, appVersion unless image.tag is set. */}}
{{- define "capstan.version" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/* Capstan's labels (what `capstan check`, `capstan uninstall` and `capstan logs` select on):
part-of, the installation (the namespace) and the version, as `capstan install` writes them. */}}
{{- define "capstan.selectorLabels" -}}
app.kubernetes.io/part-of: capstan
app.kubernetes.io/instance: {{ .Release.Namespace }}
app.kubernetes.io/version: {{ include "capstan.version" . | quote }}
{{- end -}}

{{/* Every object's labels: Capstan's and Helm's usual two. */}}
{{- define "capstan.labels" -}}
{{ include "capstan.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The name of a cluster-scoped object: <base>-<namespace>, as `capstan install` names them. */}}
{{- define "capstan.clusterName" -}}
{{- printf "%s-%s" .base .root.Release.Namespace -}}
{{- end -}}
