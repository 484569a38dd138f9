{{/*
How KEDA reaches Redis. KEDA takes host:port, never a redis:// URL: the
address comes from the Secret's host/port keys (TriggerAuthentication) or,
when the Secret has none, from redis.address in values.
*/}}

{{/* Trigger metadata for the connection (no secret in it). */}}
{{- define "saga.kedaConnection" -}}
{{- $r := .Values.redis -}}
{{- if $r.address }}
{{ ternary "addresses" "address" $r.cluster }}: {{ $r.address | quote }}
{{- end }}
{{- if and (not $r.cluster) (ne (int $r.database) 0) }}
databaseIndex: {{ $r.database | toString | quote }}
{{- end }}
{{- if $r.tls }}
enableTLS: "true"
{{- end }}
{{- end -}}

{{/* TriggerAuthentication parameters, as a YAML list of {parameter, key}. */}}
{{- define "saga.kedaAuthParams" -}}
{{- $r := .Values.redis -}}
{{- $k := $r.secretKeys -}}
{{- $u := get (default dict $r.users) "keda" | default dict -}}
{{- $username := default $k.username $u.username -}}
{{- $password := default $k.password $u.password -}}
{{- $out := list -}}
{{- if not $r.address -}}
{{- $out = append $out (dict "parameter" (ternary "hosts" "host" $r.cluster) "key" $k.host) -}}
{{- $out = append $out (dict "parameter" (ternary "ports" "port" $r.cluster) "key" $k.port) -}}
{{- end -}}
{{- if $username -}}
{{- $out = append $out (dict "parameter" "username" "key" $username) -}}
{{- end -}}
{{- if $password -}}
{{- $out = append $out (dict "parameter" "password" "key" $password) -}}
{{- end -}}
{{- if and $r.tls $k.ca -}}
{{- $out = append $out (dict "parameter" "ca" "key" $k.ca) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
