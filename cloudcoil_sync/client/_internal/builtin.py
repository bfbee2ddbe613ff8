"""Built-in REST mapping table for every kind in cloudcoil-models-kubernetes (Kubernetes 1.32).

One row per (apiVersion, kind): plural, namespaced, subresources. Kinds that the API server only
serves as a subresource of another resource (Scale, Eviction, TokenRequest) carry the
subresource name as plural and ``SUBRESOURCE_ONLY``.
"""

from __future__ import annotations

__all__ = ["BUILTIN_ROWS", "SUBRESOURCE_ONLY"]

SUBRESOURCE_ONLY = "subresource-only"

_POD_SUBS = "attach binding ephemeralcontainers eviction exec log portforward proxy resize status"

# (apiVersion, kind, plural, namespaced, space-separated subresources)
BUILTIN_ROWS: tuple[tuple[str, str, str, bool, str], ...] = (
    # core/v1
    ("v1", "Binding", "bindings", True, ""),
    ("v1", "ComponentStatus", "componentstatuses", False, ""),
    ("v1", "ConfigMap", "configmaps", True, ""),
    ("v1", "Endpoints", "endpoints", True, ""),
    ("v1", "Event", "events", True, ""),
    ("v1", "LimitRange", "limitranges", True, ""),
    ("v1", "Namespace", "namespaces", False, "finalize status"),
    ("v1", "Node", "nodes", False, "proxy status"),
    ("v1", "PersistentVolume", "persistentvolumes", False, "status"),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, "status"),
    ("v1", "Pod", "pods", True, _POD_SUBS),
    ("v1", "PodTemplate", "podtemplates", True, ""),
    ("v1", "ReplicationController", "replicationcontrollers", True, "scale status"),
    ("v1", "ResourceQuota", "resourcequotas", True, "status"),
    ("v1", "Secret", "secrets", True, ""),
    ("v1", "ServiceAccount", "serviceaccounts", True, "token"),
    ("v1", "Service", "services", True, "proxy status"),
    # admissionregistration.k8s.io
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
        "",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
        "",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        False,
        "status",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        False,
        "",
    ),
    (
        "admissionregistration.k8s.io/v1alpha1",
        "MutatingAdmissionPolicy",
        "mutatingadmissionpolicies",
        False,
        "",
    ),
    (
        "admissionregistration.k8s.io/v1alpha1",
        "MutatingAdmissionPolicyBinding",
        "mutatingadmissionpolicybindings",
        False,
        "",
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        False,
        "status",
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        False,
        "",
    ),
    # apiextensions / apiregistration / internal
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        "status",
    ),
    ("apiregistration.k8s.io/v1", "APIService", "apiservices", False, "status"),
    ("internal.apiserver.k8s.io/v1alpha1", "StorageVersion", "storageversions", False, "status"),
    # apps/v1
    ("apps/v1", "ControllerRevision", "controllerrevisions", True, ""),
    ("apps/v1", "DaemonSet", "daemonsets", True, "status"),
    ("apps/v1", "Deployment", "deployments", True, "scale status"),
    ("apps/v1", "ReplicaSet", "replicasets", True, "scale status"),
    ("apps/v1", "StatefulSet", "statefulsets", True, "scale status"),
    # authentication / authorization (create-only reviews)
    ("authentication.k8s.io/v1", "SelfSubjectReview", "selfsubjectreviews", False, ""),
    ("authentication.k8s.io/v1", "TokenReview", "tokenreviews", False, ""),
    ("authentication.k8s.io/v1", "TokenRequest", "token", True, SUBRESOURCE_ONLY),
    ("authentication.k8s.io/v1beta1", "SelfSubjectReview", "selfsubjectreviews", False, ""),
    (
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        True,
        "",
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        "",
    ),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", False, ""),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "subjectaccessreviews", False, ""),
    # autoscaling / batch
    ("autoscaling/v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, "status"),
    ("autoscaling/v1", "Scale", "scale", True, SUBRESOURCE_ONLY),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, "status"),
    ("batch/v1", "CronJob", "cronjobs", True, "status"),
    ("batch/v1", "Job", "jobs", True, "status"),
    # certificates / coordination / discovery / events
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        False,
        "approval status",
    ),
    ("certificates.k8s.io/v1alpha1", "ClusterTrustBundle", "clustertrustbundles", False, ""),
    ("coordination.k8s.io/v1", "Lease", "leases", True, ""),
    ("coordination.k8s.io/v1alpha2", "LeaseCandidate", "leasecandidates", True, ""),
    ("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", True, ""),
    ("events.k8s.io/v1", "Event", "events", True, ""),
    # flowcontrol
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "flowschemas", False, "status"),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        False,
        "status",
    ),
    # networking / node / policy
    ("networking.k8s.io/v1", "Ingress", "ingresses", True, "status"),
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", False, ""),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True, ""),
    ("networking.k8s.io/v1beta1", "IPAddress", "ipaddresses", False, ""),
    ("networking.k8s.io/v1beta1", "ServiceCIDR", "servicecidrs", False, "status"),
    ("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False, ""),
    ("policy/v1", "Eviction", "eviction", True, SUBRESOURCE_ONLY),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, "status"),
    # rbac
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False, ""),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False, ""),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", True, ""),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True, ""),
    # resource.k8s.io (dynamic resource allocation)
    ("resource.k8s.io/v1alpha3", "DeviceClass", "deviceclasses", False, ""),
    ("resource.k8s.io/v1alpha3", "ResourceClaim", "resourceclaims", True, "status"),
    ("resource.k8s.io/v1alpha3", "ResourceClaimTemplate", "resourceclaimtemplates", True, ""),
    ("resource.k8s.io/v1alpha3", "ResourceSlice", "resourceslices", False, ""),
    ("resource.k8s.io/v1beta1", "DeviceClass", "deviceclasses", False, ""),
    ("resource.k8s.io/v1beta1", "ResourceClaim", "resourceclaims", True, "status"),
    ("resource.k8s.io/v1beta1", "ResourceClaimTemplate", "resourceclaimtemplates", True, ""),
    ("resource.k8s.io/v1beta1", "ResourceSlice", "resourceslices", False, ""),
    # scheduling / storage / storagemigration
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, ""),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers", False, ""),
    ("storage.k8s.io/v1", "CSINode", "csinodes", False, ""),
    ("storage.k8s.io/v1", "CSIStorageCapacity", "csistoragecapacities", True, ""),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", False, ""),
    ("storage.k8s.io/v1", "VolumeAttachment", "volumeattachments", False, "status"),
    ("storage.k8s.io/v1alpha1", "VolumeAttributesClass", "volumeattributesclasses", False, ""),
    ("storage.k8s.io/v1beta1", "VolumeAttributesClass", "volumeattributesclasses", False, ""),
    (
        "storagemigration.k8s.io/v1alpha1",
        "StorageVersionMigration",
        "storageversionmigrations",
        False,
        "status",
    ),
)
