{{- define "name" -}}{{ default .Chart.Name .Values.name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- $x := 1 }}{{ range $i, $p := .Values.ports }}{{ if eq $i 0 }}{{ $x = add $x $p }}{{ else if gt $p 100 }}{{ break }}{{ end }}{{ end -}}
name: {{ include "name" . | quote }}
x: {{ $x }} {{ printf "%05.2f|%-6s|%v|%q|%x" .Values.ratio "ab" .Values.labels "q" 255 }}
{{ with .Values.image }}image: {{ .repository }}:{{ .tag | default "latest" }}{{ else }}none{{ end }}
{{- range $k, $v := .Values.labels }}
  {{ $k }}: {{ $v | upper | quote }}
{{- end }}
{{ tpl .Values.tpl . }} {{ len .Values.list }} {{ index .Values.list 1 }} {{ slice .Values.list 1 2 }}
{{ toYaml .Values | nindent 2 }}{{ toJson .Values.image }} {{ .Values.missing }} {{ .Values.nothing }}
{{ and 1 0 }} {{ or 0 "" "z" }} {{ not true }} {{ html "<a>" }} {{ js "'x'" }} {{ urlquery "a b" }}
{{/* a comment */}}{{ block "b" . }}block {{ .Release.Name }}{{ end }} {{ template "name" . }}
