{{/* kopc-ctf.name: the chart's name, or nameOverride. */}}
{{- define "kopc-ctf.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* kopc-ctf.fullname: the prefix of every object's name. */}}
{{- define "kopc-ctf.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "kopc-ctf.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "kopc-ctf.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* kopc-ctf.selectorLabels: what the Services and the PDB select the pods by. */}}
{{- define "kopc-ctf.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kopc-ctf.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* kopc-ctf.labels: on every object. */}}
{{- define "kopc-ctf.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kopc-ctf.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kopc
{{- end -}}

{{/* kopc-ctf.serviceAccountName: the identity the operator runs as. */}}
{{- define "kopc-ctf.serviceAccountName" -}}
{{- default (include "kopc-ctf.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* kopc-ctf.image: repository:tag, the tag defaulting to the appVersion. */}}
{{- define "kopc-ctf.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* kopc-ctf.webhookName: the webhook's Service, Certificate and Secret prefix. */}}
{{- define "kopc-ctf.webhookName" -}}
{{- printf "%s-webhook" (include "kopc-ctf.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* kopc-ctf.webhookCertManager: "true" when cert-manager makes the webhook's
certificate (webhook.certManager.enabled true, or auto and its API served). */}}
{{- define "kopc-ctf.webhookCertManager" -}}
{{- $cm := .Values.webhook.certManager.enabled -}}
{{- if or (eq (toString $cm) "true") (and (eq (toString $cm) "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1")) -}}
true
{{- end -}}
{{- end -}}

{{/* kopc-ctf.gatewayCA: "true" when the gateway mode is on and the probe is
given a CA bundle to mount (operator.gateway.probeCA: a ConfigMap or a Secret);
a bundle without a probe address, or from both, fails the render. */}}
{{- define "kopc-ctf.gatewayCA" -}}
{{- $g := .Values.operator.gateway -}}
{{- if and $g.domain (or $g.probeCA.configMap $g.probeCA.secret) -}}
{{- if and $g.probeCA.configMap $g.probeCA.secret -}}
{{- fail "operator.gateway.probeCA: set configMap or secret, not both" -}}
{{- end -}}
{{- if not $g.probeAddress -}}
{{- fail "operator.gateway.probeCA needs operator.gateway.probeAddress: the CA is what the probe verifies the gateway's certificate against" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}
