{{/*
Names, labels and the shared pieces of every workload.
*/}}

{{- define "saga.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "saga.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of a step's objects: <fullname>-<step>, underscores made DNS-safe. */}}
{{- define "saga.stepName" -}}
{{- printf "%s-%s" (include "saga.fullname" .root) (.step | replace "_" "-") | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "saga.selectorLabels" -}}
app.kubernetes.io/name: {{ include "saga.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "saga.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "saga.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: saga
{{- end -}}

{{/* Selector labels of one step: call with (dict "root" $ "step" $name). */}}
{{- define "saga.stepSelectorLabels" -}}
{{ include "saga.selectorLabels" .root }}
app.kubernetes.io/component: {{ .step | replace "_" "-" }}
{{- end -}}

{{- define "saga.stepLabels" -}}
{{ include "saga.labels" .root }}
app.kubernetes.io/component: {{ .step | replace "_" "-" }}
{{- end -}}

{{- define "saga.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* A step's values: stepDefaults overridden by steps.<name>. Returns YAML. */}}
{{- define "saga.stepValues" -}}
{{- $defaults := deepCopy .root.Values.stepDefaults -}}
{{- $own := deepCopy (default dict .spec) -}}
{{- toYaml (mergeOverwrite $defaults $own) -}}
{{- end -}}

{{/* SAGA_<STEP> prefix of a step's own settings. */}}
{{- define "saga.stepEnvPrefix" -}}
{{- printf "SAGA_%s" (upper .) -}}
{{- end -}}

{{/* Enabled steps, sorted, as a YAML list of names. */}}
{{- define "saga.enabledSteps" -}}
{{- $names := list -}}
{{- range $name, $spec := .Values.steps -}}
{{- $s := include "saga.stepValues" (dict "root" $ "spec" $spec) | fromYaml -}}
{{- if $s.enabled -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- toYaml (sortAlpha $names) -}}
{{- end -}}

{{/*
Every worker Deployment as a YAML list: the document pipeline's enabled steps
(`steps`), then each saga type's (`types`, docs/sagas.md). Each item has the
type, the step, the app (module:attr; "" for the document pipeline), `name`
(the objects' name part: the step, or <type>-<step>), `values` (stepDefaults
overridden by the step's own) and `undo`: whether the step has a compensation,
whose queue (undo:<step>) its workers also serve: the document pipeline's
publish (with config.resultsUrl), or a step marked `compensable: true`.
*/}}
{{- define "saga.workers" -}}
{{- $out := list -}}
{{- range $step := include "saga.enabledSteps" . | fromYamlArray -}}
{{- $v := include "saga.stepValues" (dict "root" $ "spec" (get $.Values.steps $step)) | fromYaml -}}
{{- $publish := and (eq $step "publish") (not (empty $.Values.config.resultsUrl)) -}}
{{- $undo := or $publish (eq (toString $v.compensable) "true") -}}
{{- $out = append $out (dict "type" "documents" "step" $step "app" "" "name" $step "values" $v "undo" $undo) -}}
{{- end -}}
{{- range $type, $t := .Values.types -}}
{{- range $step, $spec := $t.steps -}}
{{- $v := include "saga.stepValues" (dict "root" $ "spec" $spec) | fromYaml -}}
{{- if $v.enabled -}}
{{- $name := printf "%s-%s" $type $step -}}
{{- $undo := eq (toString $v.compensable) "true" -}}
{{- $out = append $out (dict "type" $type "step" $step "app" $t.app "name" $name "values" $v "undo" $undo) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
Ready stream of one step in one partition: <prefix>:{p<N>}:ready:<step> for the
document pipeline, <prefix>:{<type>.p<N>}:ready:<step> for another saga type.
*/}}
{{- define "saga.readyStream" -}}
{{- $tag := printf "p%d" (int .partition) -}}
{{- if and .type (ne .type "documents") }}{{ $tag = printf "%s.%s" .type $tag }}{{ end -}}
{{- printf "%s:{%s}:ready:%s" .root.Values.config.keyPrefix $tag .step -}}
{{- end -}}

{{/* The one consumer group on every ready stream. */}}
{{- define "saga.consumerGroup" -}}executors{{- end -}}

{{/* Mount point of the Redis CA bundle. */}}
{{- define "saga.caDir" -}}/etc/saga/redis-ca{{- end -}}

{{/*
Every plain setting, as a YAML map of env name to string: the ConfigMap's
data, and the init Job's env (the hook runs before the ConfigMap exists).
*/}}
{{- define "saga.settings" -}}
{{- $c := .Values.config -}}
SAGA_PARTITIONS: {{ $c.partitions | toString | quote }}
SAGA_KEY_PREFIX: {{ $c.keyPrefix | quote }}
SAGA_REDIS_CLUSTER: {{ ternary "true" "false" .Values.redis.cluster | quote }}
SAGA_HEALTH_PORT: {{ $c.healthPort | toString | quote }}
{{- /* The kubelet's probes and Prometheus reach the pod's IP: every address. */}}
SAGA_HEALTH_HOST: "0.0.0.0"
SAGA_LOG_FORMAT: {{ $c.logFormat | quote }}
SAGA_LOG_LEVEL: {{ $c.logLevel | quote }}
SAGA_PARSER: {{ $c.parser | quote }}
{{- if .Values.metrics.byUser }}
SAGA_METRICS_BY_USER: "true"
{{- end }}
{{- with $c.documentSource }}
SAGA_DOCUMENT_SOURCE: {{ . | quote }}
{{- end }}
SAGA_DOCUMENT_ROOTS: {{ join "," $c.documentRoots | default "none" | quote }}
{{- with $c.documentUrlPrefixes }}
SAGA_DOCUMENT_URL_PREFIXES: {{ join "," . | quote }}
{{- end }}
{{- with $c.documentNetworks }}
SAGA_DOCUMENT_NETWORKS: {{ join "," . | quote }}
{{- end }}
{{- with $c.billingUrl }}
SAGA_BILLING_URL: {{ . | quote }}
{{- end }}
{{- with $c.resultsUrl }}
SAGA_RESULTS_URL: {{ . | quote }}
{{- end }}
{{- with $c.llmModel }}
SAGA_LLM_MODEL: {{ . | quote }}
{{- end }}
{{- with $c.otlpEndpoint }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ . | quote }}
{{- end }}
{{- if .Values.redis.secretKeys.ca }}
SAGA_REDIS_CA_FILE: {{ printf "%s/ca.crt" (include "saga.caDir" .) | quote }}
{{- end }}
{{- range $name := include "saga.enabledSteps" . | fromYamlArray }}
{{- $s := include "saga.stepValues" (dict "root" $ "spec" (get $.Values.steps $name)) | fromYaml }}
{{- $p := include "saga.stepEnvPrefix" $name }}
{{ $p }}_CONCURRENCY: {{ $s.concurrency | toString | quote }}
{{ $p }}_MAX_ATTEMPTS: {{ $s.maxAttempts | toString | quote }}
{{ $p }}_TIMEOUT: {{ $s.timeoutSeconds | toString | quote }}
{{ $p }}_LEASE: {{ $s.leaseSeconds | toString | quote }}
{{ $p }}_BACKOFF: {{ $s.backoffSeconds | toString | quote }}
{{- end }}
{{- range $k, $v := $c.extra }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/*
Redis connection env of one component (call with dict "root" $ "role" <role>,
role one of executor, controller, console, init): REDIS_URL from the Secret, or
built by Kubernetes from the Secret's parts with $(VAR) references. The role's own
ACL user (redis.users.<role>) when it has one, else the shared secretKeys user.
No value is ever inlined.
*/}}
{{- define "saga.redisEnv" -}}
{{- $r := .root.Values.redis -}}
{{- $k := $r.secretKeys -}}
{{- $u := get (default dict $r.users) .role | default dict -}}
{{- $url := default $k.url $u.url -}}
{{- $username := default $k.username $u.username -}}
{{- $password := default $k.password $u.password -}}
{{- if $url }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $r.existingSecret }}
      key: {{ $url }}
{{- else }}
- name: REDIS_HOST
  valueFrom:
    secretKeyRef:
      name: {{ $r.existingSecret }}
      key: {{ $k.host }}
- name: REDIS_PORT
  valueFrom:
    secretKeyRef:
      name: {{ $r.existingSecret }}
      key: {{ $k.port }}
{{- if $username }}
- name: REDIS_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $r.existingSecret }}
      key: {{ $username }}
{{- end }}
{{- $auth := ternary "$(REDIS_USERNAME)@" "" (not (empty $username)) }}
- name: REDIS_URL
  value: {{ printf "%s://%s$(REDIS_HOST):$(REDIS_PORT)/%d" (ternary "rediss" "redis" $r.tls) $auth (int $r.database) | quote }}
{{- end }}
{{- if $password }}
{{- /* Its own variable, never spliced into the URL: any character works, and
       the URL holds no secret. saga uses it when the URL carries no password. */}}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $r.existingSecret }}
      key: {{ $password }}
{{- end }}
{{- end -}}

{{/* Volumes every pod has: a writable /tmp, and the CA bundle when TLS has one. */}}
{{- define "saga.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- if .Values.redis.secretKeys.ca }}
- name: redis-ca
  secret:
    secretName: {{ .Values.redis.existingSecret }}
    defaultMode: 0444
    items:
      - key: {{ .Values.redis.secretKeys.ca }}
        path: ca.crt
{{- end }}
{{- end -}}

{{- define "saga.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.redis.secretKeys.ca }}
- name: redis-ca
  mountPath: {{ include "saga.caDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Fail early, in words, on combinations the schema cannot express. */}}
{{- define "saga.validate" -}}
{{- $r := .Values.redis -}}
{{- if and (not $r.secretKeys.url) (or (not $r.secretKeys.host) (not $r.secretKeys.port)) -}}
{{- fail "redis.secretKeys: set `url`, or both `host` and `port`, so the workers can build REDIS_URL from the Secret" -}}
{{- end -}}
{{- if and .Values.keda.enabled (not $r.address) (or (not $r.secretKeys.host) (not $r.secretKeys.port)) -}}
{{- fail "keda.enabled needs the Redis address as host:port: set redis.secretKeys.host and .port (keys of the Secret) or redis.address; KEDA cannot read a redis:// URL" -}}
{{- end -}}
{{- if and $r.secretKeys.ca (not $r.tls) -}}
{{- fail "redis.secretKeys.ca is set but redis.tls is false: set redis.tls: true (and use rediss:// in the Secret's url)" -}}
{{- end -}}
{{- range $role, $u := default dict $r.users -}}
{{- if and $r.secretKeys.url (not $u.url) (or $u.username $u.password) -}}
{{- fail (printf "redis.users.%s: secretKeys.url is set, so give this user its own url key (a URL holds its user and password)" $role) -}}
{{- end -}}
{{- end -}}
{{- if and $r.cluster (ne (int $r.database) 0) -}}
{{- fail "redis.database must be 0 when redis.cluster is true (a cluster has only database 0)" -}}
{{- end -}}
{{- range $name := include "saga.enabledSteps" . | fromYamlArray -}}
{{- $s := include "saga.stepValues" (dict "root" $ "spec" (get $.Values.steps $name)) | fromYaml -}}
{{- include "saga.validateCooldown" (dict "name" $name "s" $s "root" $) -}}
{{- if gt (int $s.keda.minReplicas) (int $s.keda.maxReplicas) -}}
{{- fail (printf "steps.%s.keda: minReplicas (%d) is above maxReplicas (%d)" $name (int $s.keda.minReplicas) (int $s.keda.maxReplicas)) -}}
{{- end -}}
{{- end -}}
{{- range $name := list "controller" "init" "test" -}}
{{- if hasKey $.Values.steps $name -}}
{{- fail (printf "steps.%s: %q names a component of the chart; call the step something else" $name $name) -}}
{{- end -}}
{{- end -}}
{{- if eq (len (include "saga.enabledSteps" . | fromYamlArray)) 0 -}}
{{- fail "steps: at least one step must be enabled" -}}
{{- end -}}
{{- end -}}


{{/*
The drain of one step (call with dict "root" $ "s" <step values>): its own
drainSeconds, else config.drainSeconds, else its timeoutSeconds. The one place
the drain is decided: SAGA_DRAIN_SECONDS and the grace period both use it.
*/}}
{{- define "saga.stepDrain" -}}
{{- $d := .s.drainSeconds -}}
{{- if kindIs "invalid" $d -}}{{- $d = .root.Values.config.drainSeconds -}}{{- end -}}
{{- if kindIs "invalid" $d -}}{{- $d = .s.timeoutSeconds -}}{{- end -}}
{{- int $d -}}
{{- end -}}

{{/*
A step that scales to zero must stay up until its longest retry is due
(min(2^(maxAttempts-1) x backoff, 300) s plus 10% jitter), or the retry waits
for the next record to wake the step when the controller is off.
*/}}
{{- define "saga.validateCooldown" -}}
{{- $s := .s -}}
{{- if and .root.Values.keda.enabled $s.keda.enabled (eq (int $s.keda.minReplicas) 0) -}}
{{- $delay := float64 $s.backoffSeconds -}}
{{- range until (int (sub (int $s.maxAttempts) 1)) -}}{{- $delay = mulf $delay 2 -}}{{- end -}}
{{- $longest := ceil (mulf (minf $delay 300.0) 1.1) -}}
{{- if lt (float64 $s.keda.cooldownSeconds) $longest -}}
{{- fail (printf "steps.%s.keda.cooldownSeconds (%d) is shorter than the step's longest retry backoff (%.0f s = min(2^(maxAttempts-1) x backoffSeconds, 300) + 10%% jitter): raise it, or lower maxAttempts or backoffSeconds" .name (int $s.keda.cooldownSeconds) $longest) -}}
{{- end -}}
{{- end -}}
{{- end -}}
