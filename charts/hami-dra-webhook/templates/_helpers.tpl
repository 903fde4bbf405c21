{{- define "hdw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hdw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "hdw.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hdw.labels" -}}
app.kubernetes.io/name: {{ include "hdw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hami-dra-webhook
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "hdw.selector" -}}
app.kubernetes.io/name: {{ include "hdw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "hdw.driverSelector" -}}
app.kubernetes.io/name: {{ include "hdw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dra-driver
{{- end -}}

{{- define "hdw.monitorSelector" -}}
app.kubernetes.io/name: {{ include "hdw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node-monitor
{{- end -}}

{{- define "hdw.driverNamespace" -}}
{{- default .Release.Namespace .Values.driver.namespace -}}
{{- end -}}

{{/* An image reference: [registry/]repository@digest, else [registry/]repository:tag.
Arguments: (list $ .Values.x.image "default tag"). global.imageRegistry wins. */}}
{{- define "hdw.imageRef" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $tag := default (index . 2) $image.tag -}}
{{- $global := default dict $root.Values.global -}}
{{- $registry := default $image.registry $global.imageRegistry -}}
{{- $repository := ternary (printf "%s/%s" $registry $image.repository) $image.repository (ne $registry "") -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else if $tag -}}
{{- printf "%s:%s" $repository $tag -}}
{{- else -}}
{{- fail (printf "%s: give an image tag or digest" $image.repository) -}}
{{- end -}}
{{- end -}}

{{/* Pull secrets: global ones, then the component's own. */}}
{{- define "hdw.pullSecrets" -}}
{{- $root := index . 0 -}}
{{- $global := default dict $root.Values.global -}}
{{- $all := concat (default list $global.imagePullSecrets) (index . 1) -}}
{{- with $all }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The hamiDraWebhook settings the DeviceClass must agree on with the webhook, read from
deviceConfig (the webhook's defaults where absent), as JSON: driver, class, type, typeAttribute. */}}
{{- define "hdw.deviceClassSettings" -}}
{{- include "hdw.validate" . -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $web := default dict (get $config "hamiDraWebhook") -}}
{{- $attributes := default dict (get $web "attributes") -}}
{{- $nvidia := default dict (get $config "nvidia") -}}
{{- toJson (dict
  "driver" (default "hami-core-gpu.project-hami.io" (get $web "driverName"))
  "class" (default "hami-core-gpu.project-hami.io" (get $web "deviceClassName"))
  "type" (default "hami-gpu" (get $web "deviceType"))
  "typeAttribute" (default "type" (get $attributes "type"))
  "wholeGpus" (eq (toString (default false (get $web "wholeGpusByExtendedResource"))) "true")
  "count" (ternary (get $nvidia "resourceCountName") "nvidia.com/gpu" (hasKey $nvidia "resourceCountName"))) -}}
{{- end -}}

{{- define "hdw.tlsSecret" -}}
{{- if eq .Values.certificates.mode "custom" -}}
{{- required "certificates.custom.secretName is required in custom mode" .Values.certificates.custom.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "hdw.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "hdw.image" -}}
{{- include "hdw.imageRef" (list . .Values.webhook.image .Chart.AppVersion) -}}
{{- end -}}

{{- define "hdw.driverImage" -}}
{{- include "hdw.imageRef" (list . .Values.driver.image "") -}}
{{- end -}}

{{/* The legacy resource names, read from deviceConfig (HAMi's defaults when a key is absent;
a name set to "" means that resource does not exist, as in legacy HAMi). */}}
{{- define "hdw.legacyResources" -}}
{{- include "hdw.validate" . -}}
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
{{- range $name := (include "hdw.vendorResources" $ | fromJsonArray) }}
{{- $quoted = append $quoted (printf "'%s'" $name) -}}
{{- end -}}
{{- printf "[%s]" (join ", " $quoted) -}}
{{- end -}}

{{/* The ResourceQuota keys the webhook keeps for converted pods (core/quota/gpu_quota.quota_keys):
HAMi's limits.<memory|cores> and kube-apiserver's requests.<count|memory|cores>, as a CEL list. */}}
{{- define "hdw.quotaKeys" -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $nvidia := default dict $config.nvidia -}}
{{- $count := ternary $nvidia.resourceCountName "nvidia.com/gpu" (hasKey $nvidia "resourceCountName") -}}
{{- $memory := ternary $nvidia.resourceMemoryName "nvidia.com/gpumem" (hasKey $nvidia "resourceMemoryName") -}}
{{- $cores := ternary $nvidia.resourceCoreName "nvidia.com/gpucores" (hasKey $nvidia "resourceCoreName") -}}
{{- $keys := list -}}
{{- if $memory }}{{ $keys = append $keys (printf "'limits.%s'" $memory) }}{{ $keys = append $keys (printf "'requests.%s'" $memory) }}{{ end -}}
{{- if $cores }}{{ $keys = append $keys (printf "'limits.%s'" $cores) }}{{ $keys = append $keys (printf "'requests.%s'" $cores) }}{{ end -}}
{{- if $count }}{{ $keys = append $keys (printf "'requests.%s'" $count) }}{{ end -}}
{{- range $role := (include "hdw.vendorRoles" . | fromJsonArray) }}
{{- $kind := index (splitList "|" $role) 0 -}}
{{- $name := index (splitList "|" $role) 1 -}}
{{- if or (eq $kind "memory") (eq $kind "cores") }}{{ $keys = append $keys (printf "'limits.%s'" $name) }}{{ end -}}
{{- $keys = append $keys (printf "'requests.%s'" $name) -}}
{{- end -}}
{{- printf "[%s]" (join ", " (uniq $keys)) -}}
{{- end -}}

{{/* A GPU pod, in CEL over `object`: a container names a legacy resource or a DeviceClass's
implicit extended resource (deviceclass.resource.kubernetes.io/<class>: kube-scheduler gives it
whole devices of the class, KEP-5004), or it uses a claim. */}}
{{- define "hdw.gpuPod" -}}
{{- $legacy := include "hdw.legacyResources" . -}}
{{- printf "(has(object.spec.resourceClaims) && object.spec.resourceClaims.size() > 0) || %s || (has(object.spec.initContainers) && (%s || %s)) || %s" (include "hdw.usesLegacy" (list "object.spec.containers" $legacy)) (include "hdw.usesLegacy" (list "object.spec.initContainers" $legacy)) (include "hdw.usesImplicit" "object.spec.initContainers") (include "hdw.usesImplicit" "object.spec.containers") -}}
{{- end -}}

{{/* CEL: a container of the list names an implicit extended resource of a DeviceClass. */}}
{{- define "hdw.usesImplicit" -}}
{{- printf "%s.exists(c, has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith('deviceclass.resource.kubernetes.io/'))) || (has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith('deviceclass.resource.kubernetes.io/')))))" . -}}
{{- end -}}

{{/* The resource names of the vendors beyond NVIDIA that deviceConfig's hamiDraWebhook.vendors
converts, each with its role, as a JSON list of "role|name" (role: count, memory, cores, or
requestCores: a core name whose HAMi key is not kept, AWS Neuron's), read from HAMi's own
sections of deviceConfig as the webhook reads them (core/vendors/families.py,
core/quota/quota_groups.py; tests/chart checks that they agree). */}}
{{- define "hdw.vendorRoles" -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $web := default dict (get $config "hamiDraWebhook") -}}
{{- $vendors := default dict (get $web "vendors") -}}
{{- $roles := list -}}
{{- $kinds := list "count" "memory" "cores" -}}
{{- if (get (default dict (get $vendors "hygon")) "convert") -}}
{{- $hygon := default dict (get $config "hygon") -}}
{{- range $i, $key := list "resourceCountName" "resourceMemoryName" "resourceCoreName" }}
{{- with (get $hygon $key) }}{{- $roles = append $roles (printf "%s|%s" (index $kinds $i) .) -}}{{- end -}}
{{- end -}}
{{- $roles = concat $roles (list "count|hygon.com/dcunum" "count|hygon.com/hcunum" "memory|hygon.com/dcumem" "memory|hygon.com/hcumem" "cores|hygon.com/dcucores" "cores|hygon.com/hcucores") -}}
{{- end -}}
{{- if (get (default dict (get $vendors "ascend")) "convert") -}}
{{- $vnpus := get $config "vnpus" -}}
{{- if kindIs "map" $vnpus }}{{- $vnpus = get $vnpus "configs" -}}{{- end -}}
{{- if and (kindIs "slice" $vnpus) $vnpus -}}
{{- range $chip := $vnpus }}
{{- range $i, $key := list "resourceName" "resourceMemoryName" "resourceCoreName" }}
{{- with (get $chip $key) }}{{- $roles = append $roles (printf "%s|%s" (index $kinds $i) .) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- range $word := list "Ascend910A" "Ascend910B2" "Ascend910B3" "Ascend910B4-1" "Ascend910B4" "Ascend310P" "Ascend910C" }}
{{- $roles = concat $roles (list (printf "count|huawei.com/%s" $word) (printf "memory|huawei.com/%s-memory" $word) (printf "cores|huawei.com/%s-core" $word)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $pair := list (list "amd" "amd" (list "amd.com/gpu" "amd.com/gpumem" "amd.com/gpucores") "cores") (list "awsNeuron" "awsneuron" (list "aws.amazon.com/neuron" "" "aws.amazon.com/neuroncore") "requestCores") }}
{{- if (get (default dict (get $vendors (index $pair 0))) "convert") -}}
{{- $section := default dict (get $config (index $pair 1)) -}}
{{- $defaults := index $pair 2 -}}
{{- $own := get $section "resourceCountName" -}}
{{- range $i, $key := list "resourceCountName" "resourceMemoryName" "resourceCoreName" }}
{{- $name := ternary (get $section $key) (index $defaults $i) (not (empty $own)) -}}
{{- $role := ternary (index $pair 3) (index $kinds $i) (eq $i 2) -}}
{{- with $name }}{{- $roles = append $roles (printf "%s|%s" $role .) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $roles) -}}
{{- end -}}

{{/* The resource names of the vendors beyond NVIDIA that deviceConfig converts, as a JSON list. */}}
{{- define "hdw.vendorResources" -}}
{{- $names := list -}}
{{- range $role := (include "hdw.vendorRoles" . | fromJsonArray) }}
{{- $names = append $names (index (splitList "|" $role) 1) -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{/* The DeviceClasses of the converted vendors this chart creates (deviceClass.vendors says
which: drivers that ship their own class are left to do so), as a JSON list of
{name, expression}. */}}
{{- define "hdw.vendorDeviceClasses" -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $web := default dict (get $config "hamiDraWebhook") -}}
{{- $vendors := default dict (get $web "vendors") -}}
{{- $classes := list -}}
{{- range $vendor := list
  (list "hygon" "dra.hygon.com" "dra.hygon.com" "hcu")
  (list "ascend" "ascend.project-hami.io" "hami-vnpu-core.project-hami.io" "HAMivNPUCore")
  (list "amd" "gpu.amd.com" "gpu.amd.com" "")
  (list "awsNeuron" "neuron.aws.com" "neuron.aws.com" "") }}
{{- $key := index $vendor 0 -}}
{{- $settings := default dict (get $vendors $key) -}}
{{- if and (get $settings "convert") (get $.Values.deviceClass.vendors $key) -}}
{{- $driver := default (index $vendor 1) (get $settings "driverName") -}}
{{- $class := default (index $vendor 2) (get $settings "deviceClassName") -}}
{{- $expression := printf "device.driver == %s" (toJson $driver) -}}
{{- if index $vendor 3 -}}
{{- $expression = printf "%s && device.attributes[%s].type == %s" $expression (toJson $driver) (toJson (index $vendor 3)) -}}
{{- end -}}
{{- $classes = append $classes (dict "name" $class "expression" $expression) -}}
{{- end -}}
{{- end -}}
{{- toJson $classes -}}
{{- end -}}

{{/* CEL: is the pod count-only (hamiDraWebhook.wholeGpusByExtendedResource, as
core/translate/whole_gpus.py judges it): no legacy resource but the count in any app container, none in
an init container, no annotation the webhook reads, kube-scheduler as its scheduler. Such a
pod is left to kube-scheduler's extended-resource claims. Arguments: the root context and the
CEL list of legacy names. */}}
{{- define "hdw.countOnly" -}}
{{- $root := index . 0 -}}
{{- $legacy := index . 1 -}}
{{- $s := include "hdw.deviceClassSettings" $root | fromJson -}}
{{- $only := printf "(!has(c.resources) || ((!has(c.resources.limits) || c.resources.limits.all(k, k == '%s' || !(k in %s))) && (!has(c.resources.requests) || c.resources.requests.all(k, k == '%s' || !(k in %s)))))" $s.count $legacy $s.count $legacy -}}
{{- $annotations := "['nvidia.com/use-gpuuuid', 'nvidia.com/nouse-gpuuuid', 'nvidia.com/use-gputype', 'nvidia.com/nouse-gputype', 'nvidia.com/vgpu-mode', 'nvidia.com/numa-bind', 'hami.io/gpu-scheduler-policy', 'hami.io/node-scheduler-policy', 'hami.io/device-scoring-weights']" -}}
{{- printf "object.spec.containers.all(c, %s) && !(has(object.spec.initContainers) && %s) && !(has(object.metadata.annotations) && %s.exists(a, a in object.metadata.annotations)) && (!has(object.spec.schedulerName) || object.spec.schedulerName == 'default-scheduler')" $only (include "hdw.usesLegacy" (list "object.spec.initContainers" $legacy)) $annotations -}}
{{- end -}}

{{/* CEL: does a list of containers name a legacy resource in limits or requests? */}}
{{- define "hdw.usesLegacy" -}}
{{- $r := index . 1 -}}
{{- printf "%s.exists(c, has(c.resources) && ((has(c.resources.limits) && %s.exists(r, r in c.resources.limits)) || (has(c.resources.requests) && %s.exists(r, r in c.resources.requests))))" (index . 0) $r $r -}}
{{- end -}}

{{/* "true" when deviceConfig turns nvidia.overwriteEnv on (every pod then goes through the
webhook), else empty. */}}
{{- define "hdw.overwriteEnv" -}}
{{- include "hdw.validate" . -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $nvidia := default dict $config.nvidia -}}
{{- if eq (toString (default false $nvidia.overwriteEnv)) "true" }}true{{ end -}}
{{- end -}}

{{/* Values the webhook would refuse at start: fail the render with the reason instead. */}}
{{- define "hdw.validate" -}}
{{- $w := .Values.webhook -}}
{{- if gt (mulf 4 $w.templateCacheTTL) (float64 $w.gc.grace) -}}
{{- fail (printf "webhook.gc.grace (%v) must be at least 4 x webhook.templateCacheTTL (%v): a template still served from a cache could otherwise be collected" $w.gc.grace $w.templateCacheTTL) -}}
{{- end -}}
{{- if ge (float64 $w.admissionBudget) (float64 .Values.admission.timeoutSeconds) -}}
{{- fail (printf "webhook.admissionBudget (%v) must be below admission.timeoutSeconds (%v): kube-apiserver would give up on the webhook before it answers" $w.admissionBudget .Values.admission.timeoutSeconds) -}}
{{- end -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- if hasKey $config "Error" -}}
{{- fail (printf "deviceConfig is not a YAML map with an nvidia: section (%s)" (get $config "Error")) -}}
{{- end -}}
{{- range $section := list "nvidia" "hamiDraWebhook" -}}
{{- if and (hasKey $config $section) (not (kindIs "map" (get $config $section))) -}}
{{- fail (printf "deviceConfig: %s must be a map of settings" $section) -}}
{{- end -}}
{{- end -}}
{{- /* The webhook's policy refuses the same list (core/settings/policy.py _whole_gpus_conflict). */ -}}
{{- $web := default dict (get $config "hamiDraWebhook") -}}
{{- if eq (toString (default false (get $web "wholeGpusByExtendedResource"))) "true" -}}
{{- $nvidia := default dict (get $config "nvidia") -}}
{{- $adds := list -}}
{{- if ne (toString (default 0 (get $nvidia "defaultMemory"))) "0" }}{{ $adds = append $adds "nvidia.defaultMemory" }}{{ end -}}
{{- if eq (toString (default false (get $nvidia "overwriteEnv"))) "true" }}{{ $adds = append $adds "nvidia.overwriteEnv" }}{{ end -}}
{{- if (get $nvidia "runtimeClassName") }}{{ $adds = append $adds "nvidia.runtimeClassName" }}{{ end -}}
{{- if not (has (toString (default "default" (get $nvidia "gpuCorePolicy"))) (list "default" "")) }}{{ $adds = append $adds "nvidia.gpuCorePolicy" }}{{ end -}}
{{- if hasKey $nvidia "libCudaLogLevel" }}{{ if ne (toString (get $nvidia "libCudaLogLevel")) "<nil>" }}{{ $adds = append $adds "nvidia.libCudaLogLevel" }}{{ end }}{{ end -}}
{{- if $adds -}}
{{- fail (printf "deviceConfig: hamiDraWebhook.wholeGpusByExtendedResource leaves count-only pods to kube-scheduler, which gives them whole GPUs, but %s must reach them (the webhook would write them): turn one of the two off" (join ", " $adds)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The template name prefix of deviceConfig's hamiDraWebhook section (as the webhook reads
it): what the ephemeral-containers match condition recognizes converted pods by. */}}
{{- define "hdw.templatePrefix" -}}
{{- $config := fromYaml .Values.deviceConfig -}}
{{- $web := default dict (get $config "hamiDraWebhook") -}}
{{- default "hami-gpu-" (get $web "templateNamePrefix") -}}
{{- end -}}

{{/* The namespaces never converted, comma-separated: the webhook configuration does not send
them, and the webhook refuses to write templates there when called directly. */}}
{{- define "hdw.excludedNamespaces" -}}
{{- concat (list "kube-system" .Release.Namespace) .Values.admission.excludeNamespaces | uniq | join "," -}}
{{- end -}}

{{/* How kube-apiserver reaches the webhook (both webhooks of its configuration). */}}
{{- define "hdw.clientConfig" -}}
{{- $top := . -}}
{{- $path := "/mutate" -}}
{{- if kindIs "slice" . -}}
{{- $top = index . 0 -}}
{{- $path = index . 1 -}}
{{- end -}}
{{- with $top -}}
{{- $name := include "hdw.fullname" . -}}
clientConfig:
  {{- with .Values.admission.url }}
  url: {{ printf "%s%s" (trimSuffix "/mutate" .) $path | quote }}
  {{- else }}
  service:
    name: {{ $name }}
    namespace: {{ .Release.Namespace }}
    path: {{ $path }}
    port: 443
  {{- end }}
  {{- if eq .Values.certificates.mode "custom" }}
  caBundle: {{ required "certificates.custom.caBundle is required in custom mode" .Values.certificates.custom.caBundle }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The driver's nodeAffinity: driver.nodeAffinity with the GPU pool (docs/migration.md) added to
every required term. migration.scope all: any GPU node not labelled hami.io/gpu-pool legacy or
moving; any other scope: only nodes labelled hami.io/gpu-pool=dra. The legacy device plugin
and the driver never serve one node.
*/}}
{{- define "hdw.driverAffinity" -}}
{{- $affinity := deepCopy (.Values.driver.nodeAffinity | default dict) -}}
{{- $pool := dict "key" "hami.io/gpu-pool" "operator" "In" "values" (list "dra") -}}
{{- if eq .Values.migration.scope "all" -}}
{{- $pool = dict "key" "hami.io/gpu-pool" "operator" "NotIn" "values" (list "legacy" "moving") -}}
{{- end -}}
{{- $required := get $affinity "requiredDuringSchedulingIgnoredDuringExecution" | default dict -}}
{{- $terms := list -}}
{{- range (get $required "nodeSelectorTerms" | default (list (dict))) -}}
{{- $expressions := append (get . "matchExpressions" | default list) $pool -}}
{{- $terms = append $terms (merge (dict "matchExpressions" $expressions) (omit . "matchExpressions")) -}}
{{- end -}}
{{- $_ := set $required "nodeSelectorTerms" $terms -}}
{{- $_ := set $affinity "requiredDuringSchedulingIgnoredDuringExecution" $required -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/* "true" when Volcano Jobs are converted: volcano.convertJobs true, or auto and Volcano's
scheduler ConfigMap (read with lookup at install or upgrade; nothing under helm template)
enabling DRA in its predicates plugin. */}}
{{- define "hdw.volcanoJobs" -}}
{{- $wanted := .Values.volcano.convertJobs -}}
{{- if kindIs "bool" $wanted -}}
{{- if $wanted }}true{{ end -}}
{{- else -}}
{{- $where := splitList "/" .Values.volcano.schedulerConfigMap -}}
{{- $found := lookup "v1" "ConfigMap" (index $where 0) (index $where 1) -}}
{{- range $key, $text := (default dict (get (default dict $found) "data")) -}}
{{- if regexMatch "predicate\\.DynamicResourceAllocationEnable\"?'?\\s*:\\s*\"?'?true" $text }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end }}
