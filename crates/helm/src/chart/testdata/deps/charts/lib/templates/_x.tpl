{{- define "lib.x" }}x{{ end }}
