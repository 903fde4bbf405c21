{{- define "hdw.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hdw.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "hdw.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "hdw.driverSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dra-driver
{{- end -}}

{{- define "hdw.tlsSecret" -}}
{{- if eq .Values.certificates.mode "custom" -}}
{{- required "certificates.custom.secretName is required in custom mode" .Values.certificates.custom.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "hdw.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "hdw.image" -}}
{{- printf "%s:%s" .Values.webhook.image.repository (default .Chart.AppVersion .Values.webhook.image.tag) -}}
{{- end -}}

{{/* The legacy resource names, read from deviceConfig (HAMi's defaults when a key is absent;
a name set to "" means that resource does not exist, as in legacy HAMi). */}}
{{- define "hdw.legacyResources" -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $nvidia := default dict $config.nvidia -}}
{{- $defaults := dict
  "resourceCountName" "nvidia.com/gpu"
  "resourceMemoryName" "nvidia.com/gpumem"
  "resourceMemoryPercentageName" "nvidia.com/gpumem-percentage"
  "resourceCoreName" "nvidia.com/gpucores"
  "resourcePriorityName" "nvidia.com/priority" -}}
{{- $quoted := list -}}
{{- range $key := list "resourceCountName" "resourceMemoryName" "resourceMemoryPercentageName" "resourceCoreName" "resourcePriorityName" }}
{{- $name := ternary (index $nvidia $key) (index $defaults $key) (hasKey $nvidia $key) -}}
{{- if $name }}{{- $quoted = append $quoted (printf "'%s'" $name) -}}{{- end -}}
{{- end -}}
{{- printf "[%s]" (join ", " $quoted) -}}
{{- end -}}

{{/* CEL: does a list of containers name a legacy resource in limits or requests? */}}
{{- define "hdw.usesLegacy" -}}
{{- $r := index . 1 -}}
{{- printf "%s.exists(c, has(c.resources) && ((has(c.resources.limits) && %s.exists(r, r in c.resources.limits)) || (has(c.resources.requests) && %s.exists(r, r in c.resources.requests))))" (index . 0) $r $r -}}
{{- end -}}

{{/* "true" when deviceConfig turns nvidia.overwriteEnv on (every pod then goes through the
webhook), else empty. */}}
{{- define "hdw.overwriteEnv" -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $nvidia := default dict $config.nvidia -}}
{{- if eq (toString (default false $nvidia.overwriteEnv)) "true" }}true{{ end -}}
{{- end -}}
