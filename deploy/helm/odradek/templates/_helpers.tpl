{{/* Names --------------------------------------------------------------------- */}}

{{- define "odradek.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "odradek.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* <fullname>-<component>; fullname is capped at 40 so suffixes stay under 63. */}}
{{- define "odradek.component" -}}
{{- printf "%s-%s" (include "odradek.fullname" .root) .component -}}
{{- end -}}

{{- define "odradek.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "odradek.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "odradek.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels -------------------------------------------------------------------- */}}

{{- define "odradek.selectorLabels" -}}
app.kubernetes.io/name: {{ include "odradek.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "odradek.labels" -}}
helm.sh/chart: {{ include "odradek.chart" .root }}
{{ include "odradek.selectorLabels" . }}
app.kubernetes.io/part-of: odradek
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* Addresses ----------------------------------------------------------------- */}}

{{- define "odradek.controllerAddress" -}}
{{- printf "%s:%d" (include "odradek.component" (dict "root" . "component" "controller")) (int .Values.ports.grpc) -}}
{{- end -}}

{{- define "odradek.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- printf "%s:2379" (include "odradek.component" (dict "root" . "component" "etcd")) -}}
{{- else -}}
{{- required "etcd.external.endpoints is required when etcd.enabled is false and metadata.store is empty" .Values.etcd.external.endpoints -}}
{{- end -}}
{{- end -}}

{{- define "odradek.metadataStore" -}}
{{- if .Values.metadata.store -}}
{{- .Values.metadata.store -}}
{{- else -}}
{{- printf "etcd://%s" (include "odradek.etcdEndpoints" .) -}}
{{- end -}}
{{- end -}}

{{- define "odradek.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
Kafka-named settings -> ODRADEK_<NAME> env entries. Argument: a map. YAML numbers
arrive as float64: whole ones are printed as integers (536870912, not 5.36870912e+08).
*/}}
{{- define "odradek.configEnv" -}}
{{- range $key, $value := . }}
{{- $text := toString $value }}
{{- if and (kindIs "float64" $value) (eq $value (float64 (int64 $value))) }}
{{- $text = printf "%d" (int64 $value) }}
{{- end }}
- name: {{ printf "ODRADEK_%s" ($key | replace "." "_" | upper) }}
  value: {{ $text | quote }}
{{- end }}
{{- end -}}

{{/* The pod template's annotations block (omitted when empty). Arguments: root, values. */}}
{{- define "odradek.podAnnotations" -}}
{{- $annotations := dict -}}
{{- if .root.Values.metrics.podAnnotations -}}
{{- $_ := set $annotations "prometheus.io/scrape" "true" -}}
{{- $_ := set $annotations "prometheus.io/port" (toString .root.Values.ports.metrics) -}}
{{- $_ := set $annotations "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- $annotations = merge (deepCopy (.values.podAnnotations | default dict)) $annotations -}}
{{- if $annotations }}
annotations:
  {{- toYaml $annotations | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Probes. Argument: root. */}}
{{- define "odradek.probes" -}}
{{- $p := .Values.probes -}}
{{- /* The kubelet presents no client certificate: with internal TLS, probe over HTTP. */ -}}
{{- if and (eq $p.type "grpc") (not .Values.internalTls.enabled) }}
startupProbe:
  grpc:
    port: {{ .Values.ports.grpc }}
    service: liveness
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
livenessProbe:
  grpc:
    port: {{ .Values.ports.grpc }}
    service: liveness
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
readinessProbe:
  grpc:
    port: {{ .Values.ports.grpc }}
    service: readiness
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
{{- else }}
startupProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
{{- end }}
{{- end -}}

{{/*
The Odradek container of a component. Arguments: root, component (service name),
values (the component's values), env (extra env entries, YAML text), volumeMounts
(YAML text), kafkaPort (bool: the Kafka bootstrap port and the broker ports),
extraPorts (more container ports, YAML text).
The entry point derives node.id from ODRADEK_NODE_ID_FROM and binds gRPC/metrics to
POD_IP, which it also registers with the controller (other pods dial it).
*/}}
{{- define "odradek.container" -}}
{{- $root := .root -}}
- name: {{ .component }}
  image: {{ include "odradek.image" $root | quote }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  args: [{{ .component | quote }}]
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: ODRADEK_GRPC_LISTENER
      value: "$(POD_IP):{{ $root.Values.ports.grpc }}"
    - name: ODRADEK_METRICS_PORT
      value: {{ $root.Values.ports.metrics | quote }}
    - name: ODRADEK_LOG_LEVEL
      value: {{ $root.Values.logLevel | quote }}
    {{- if ne .component "controller" }}
    - name: ODRADEK_CONTROLLER_ADDRESS
      value: {{ include "odradek.controllerAddress" $root | quote }}
    {{- end }}
    {{- if and $root.Values.internalTls.enabled (ne .component "mirror") }}
    - name: ODRADEK_INTERNAL_TLS_DIR
      value: {{ $root.Values.internalTls.mountPath | quote }}
    - name: ODRADEK_INTERNAL_TLS_SERVER_NAME
      value: {{ $root.Values.internalTls.serverName | quote }}
    {{- end }}
    {{- with .env }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- include "odradek.configEnv" (merge (dict) (.values.config | default dict) $root.Values.config) | trim | nindent 4 }}
  ports:
    {{- if .kafkaPort }}
    - name: kafka
      containerPort: {{ $root.Values.ports.kafka }}
      protocol: TCP
    {{- range $i := until (int $root.Values.ports.brokerCount) }}
    - name: broker-{{ add 100 $i }}
      containerPort: {{ add $root.Values.ports.brokerStart $i }}
      protocol: TCP
    {{- end }}
    {{- end }}
    - name: grpc
      containerPort: {{ $root.Values.ports.grpc }}
      protocol: TCP
    - name: metrics
      containerPort: {{ $root.Values.ports.metrics }}
      protocol: TCP
    {{- with .extraPorts }}
    {{- . | nindent 4 }}
    {{- end }}
  {{- include "odradek.probes" $root | trim | nindent 2 }}
  {{- with .values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- if and $root.Values.internalTls.enabled (ne .component "mirror") }}
    - name: internal-tls
      mountPath: {{ $root.Values.internalTls.mountPath }}
      readOnly: true
    {{- end }}
    {{- with .volumeMounts }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* Pod-level fields shared by every Odradek pod. Arguments: root, values. */}}
{{- define "odradek.podCommon" -}}
{{- $root := .root -}}
serviceAccountName: {{ include "odradek.serviceAccountName" $root }}
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget. Arguments: root, component, values. */}}
{{- define "odradek.pdb" -}}
{{- if .root.Values.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "odradek.component" . }}
  labels:
    {{- include "odradek.labels" . | nindent 4 }}
spec:
  maxUnavailable: {{ .values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "odradek.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A headless Service exposing gRPC and metrics of a component. Arguments: root, component. */}}
{{- define "odradek.headlessService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "odradek.component" . }}-headless
  labels:
    {{- include "odradek.labels" . | nindent 4 }}
    odradek.io/metrics: "true"
spec:
  type: ClusterIP
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    {{- include "odradek.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ .root.Values.ports.grpc }}
      targetPort: grpc
      protocol: TCP
    - name: metrics
      port: {{ .root.Values.ports.metrics }}
      targetPort: metrics
      protocol: TCP
{{- end -}}


{{/* The internal TLS Secret as a pod volume (when enabled). Argument: root. */}}
{{- define "odradek.internalTlsVolume" -}}
{{- if .Values.internalTls.enabled }}
- name: internal-tls
  secret:
    secretName: {{ required "internalTls.secretName is required when internalTls.enabled is true" .Values.internalTls.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}
