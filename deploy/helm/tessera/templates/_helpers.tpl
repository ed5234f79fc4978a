{{/* Base name of every object: the release name, cut to fit DNS labels. */}}
{{- define "tessera.fullname" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "tessera.labels" -}}
app.kubernetes.io/part-of: tessera
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* selectorLabels COMPONENT: the labels a component's pods are selected by. */}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "tessera.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .name $tag -}}
{{- end -}}

{{- define "tessera.extenderName" -}}{{ include "tessera.fullname" . }}-extender{{- end -}}
{{- define "tessera.schedulerName" -}}{{ include "tessera.fullname" . }}-kube-scheduler{{- end -}}
{{- define "tessera.nodeName" -}}{{ include "tessera.fullname" . }}-node{{- end -}}

{{/* The extender's in-cluster URL, as kube-scheduler calls it. */}}
{{- define "tessera.extenderURL" -}}
http://{{ include "tessera.extenderName" . }}.{{ .Release.Namespace }}.svc:{{ .Values.extender.port }}
{{- end -}}

{{/* The KubeSchedulerConfiguration `extenders` list (docs/scheduler-extender.md). */}}
{{- define "tessera.extenders" -}}
extenders:
- urlPrefix: {{ include "tessera.extenderURL" . }}
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  preemptVerb: preempt
  weight: {{ .Values.scheduler.extender.weight }}
  nodeCacheCapable: true
  httpTimeout: {{ .Values.scheduler.extender.httpTimeout }}
  ignorable: {{ .Values.scheduler.extender.ignorable }}
  managedResources:
  # The slots too: the extender counts them (docs/scheduler-extender.md).
  - name: {{ .Values.resourceNames.gpu }}
    ignoredByScheduler: true
  - name: {{ .Values.resourceNames.gpuMem }}
    ignoredByScheduler: true
  - name: {{ .Values.resourceNames.gpuCore }}
    ignoredByScheduler: true
  {{- with .Values.frontEnds.gpushare }}
  {{- if .enabled }}
  # gpushare: the nodes advertise GiB, so kube-scheduler counts them too.
  - name: {{ .gpuMem }}
    ignoredByScheduler: false
  {{- end }}
  {{- end }}
  {{- with .Values.frontEnds.hami }}
  {{- if .enabled }}
  # HAMi: the nodes advertise the count as slots, which the extender counts; the rest only it checks.
  - name: {{ .gpu }}
    ignoredByScheduler: true
  - name: {{ .gpuMem }}
    ignoredByScheduler: true
  - name: {{ .gpuMemPercentage }}
    ignoredByScheduler: true
  - name: {{ .gpuCores }}
    ignoredByScheduler: true
  {{- end }}
  {{- end }}
  {{- with .Values.scheduler.extender.extraManagedResources }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- if .Values.scheduler.extender.claims.enabled }}
# DRA claim pods: steered by the GPU the DRA allocator will take on each node;
# pods without GPUs (extender.placePodsWithoutGpus): by what they strand.
- urlPrefix: {{ include "tessera.extenderURL" . }}/dra
  prioritizeVerb: prioritize
  weight: {{ .Values.scheduler.extender.claims.weight }}
  nodeCacheCapable: true
  httpTimeout: {{ .Values.scheduler.extender.httpTimeout }}
  ignorable: true
{{- end }}
{{- end -}}

{{/* kube-scheduler's configuration file (mode deployment: a profile of its own). */}}
{{- define "tessera.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
{{- if .Values.scheduler.extender.claims.enabled }}
percentageOfNodesToScore: 100
{{- end }}
{{- if eq .Values.scheduler.mode "deployment" }}
leaderElection:
  leaderElect: {{ gt (int .Values.scheduler.replicas) 1 }}
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ include "tessera.schedulerName" . }}
profiles:
- schedulerName: {{ .Values.scheduler.name }}
{{- end }}
{{ include "tessera.extenders" . }}
{{- end -}}
