{{ $d := dict "a" 1 "b" (list 1 2 3) }}{{ $_ := set $d "c" "x" }}{{ merge $d (dict "z" 9) | toYaml }}
{{ range until 3 }}{{ . }}{{ end }} {{ repeat 3 "ab" }} {{ semverCompare ">=1.20-0" "1.27.1" }}
{{ sha256sum "x" }} {{ b64enc "hi" | b64dec }} {{ randAlphaNum 8 }} {{ uuidv4 }} {{ now | date "2006-01-02" }}
{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }} {{ splitList "," "a,b,c" | join "|" }} {{ fromYaml "a: [1, 2]" }}
{{ required "need name" .Values.name }} {{ ternary "y" "n" .Values.enabled }} {{ mul 3 (div 10 4) }} {{ float64 "1.5" | floor }}
{{ list 3 1 2 | sortAlpha | uniq | reverse }} {{ kindOf .Values.labels }} {{ typeOf 1.5 }} {{ deepEqual (list 1) (list 1) }}
{{ "abc" | substr 1 2 }} {{ wrap 5 "a long line of words" }} {{ indent 4 "x\ny" }} {{ coalesce "" nil "c" }}
{{ fail "stop" }}
