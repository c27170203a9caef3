{{/* Names and labels shared by every template of the chart. */}}

{{- define "streamapp-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamapp-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "streamapp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamapp-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamapp-operator.labels" -}}
{{ include "streamapp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "streamapp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "streamapp-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "streamapp-operator.image" -}}
{{- printf "%s:%s" .repository (default .appVersion .tag) -}}
{{- end -}}

{{/* The rules the operator needs in every namespace it manages apps in. It grants drivers
     rights over pods, services, configmaps and PVCs, so it must hold them itself (RBAC
     forbids granting more than one has). */}}
{{- define "streamapp-operator.namespacedRules" -}}
- apiGroups: ["streamapp.io"]
  resources: ["streamapps"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/status", "streamapps/scale"]
  verbs: ["get", "patch", "update"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch", "update"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch", "update"]
- apiGroups: [""]
  resources: ["pods", "services", "configmaps", "persistentvolumeclaims", "serviceaccounts"]
  verbs: ["create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create", "get", "list", "watch", "update", "patch", "delete"]
{{- /* The driver's fence: each app's driver holds a Lease; the operator grants that in the
     driver's Role (so holds it too), releases the Lease of a driver it saw end, deletes it with
     the app, and watches the Leases for a driver announcing standby (a rolling hand-over). */}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create", "get", "list", "watch", "update", "patch", "delete"]
{{- /* The operator reads partition counts and lag from the app's Kafka with the app's own
     credentials: it reads the Secrets spec.kafka.tls/sasl name, one by name (get only: no
     list or watch, so it cannot enumerate Secrets it was not pointed at). */}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end -}}
