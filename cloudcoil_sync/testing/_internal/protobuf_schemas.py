"""The messages of the built-in kinds kubectl creates with protobuf bodies, by field number.

Only the fields kubectl's imperative ``create`` commands fill are listed (others are skipped by
the decoder). The numbers were read from bodies kubectl 1.32 sent (tests/testing/
kubectl_protobuf/), matched against the JSON kubectl prints for the same command with
``--dry-run=client -o json``. The Lease is client-go 1.32's leader election (a compiled
controller's), read from k8s.io/api's generated.proto and checked against recorded bodies.
"""

from __future__ import annotations

__all__ = ["KINDS", "MESSAGES", "Message"]

# A field: (JSON name, type); a type is a scalar, a message name, "[]<type>" (repeated) or
# "map" / "bytesmap" / "quantitymap" (map<string,string|bytes|Quantity>); "IntOrString" is
# decoded to an int or a string and kept even when 0, as is a "?<scalar>" (a Go pointer). A
# message with no JSON name is embedded: its fields are the parent's.
Message = dict[int, tuple[str, str]]

MESSAGES: dict[str, Message] = {
    "Time": {1: ("seconds", "int"), 2: ("nanos", "int")},
    "MicroTime": {1: ("seconds", "int"), 2: ("nanos", "int")},
    "OwnerReference": {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool"),
        7: ("blockOwnerDeletion", "bool"),
    },
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int"),
        8: ("creationTimestamp", "Time"),
        10: ("deletionGracePeriodSeconds", "int"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        13: ("ownerReferences", "[]OwnerReference"),
        14: ("finalizers", "[]string"),
    },
    "NamespaceSpec": {1: ("finalizers", "[]string")},
    "ObjectReference": {
        1: ("kind", "string"),
        2: ("namespace", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("resourceVersion", "string"),
        7: ("fieldPath", "string"),
    },
    "LocalObjectReference": {1: ("name", "string")},
    "PolicyRule": {
        1: ("verbs", "[]string"),
        2: ("apiGroups", "[]string"),
        3: ("resources", "[]string"),
        4: ("resourceNames", "[]string"),
        5: ("nonResourceURLs", "[]string"),
    },
    "Subject": {
        1: ("kind", "string"),
        2: ("apiGroup", "string"),
        3: ("name", "string"),
        4: ("namespace", "string"),
    },
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
    "BoundObjectReference": {
        1: ("kind", "string"),
        2: ("apiVersion", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
    },
    "TokenRequestSpec": {
        1: ("audiences", "[]string"),
        3: ("boundObjectRef", "BoundObjectReference"),
        4: ("expirationSeconds", "int"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string"),
        2: ("verb", "string"),
        3: ("group", "string"),
        4: ("version", "string"),
        5: ("resource", "string"),
        6: ("subresource", "string"),
        7: ("name", "string"),
    },
    "NonResourceAttributes": {1: ("path", "string"), 2: ("verb", "string")},
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
    "LabelSelector": {1: ("matchLabels", "map")},
    "ContainerPort": {
        1: ("name", "string"),
        2: ("hostPort", "int"),
        3: ("containerPort", "int"),
        4: ("protocol", "string"),
    },
    "Container": {
        1: ("name", "string"),
        2: ("image", "string"),
        3: ("command", "[]string"),
        6: ("ports", "[]ContainerPort"),
    },
    "PodSpec": {2: ("containers", "[]Container"), 3: ("restartPolicy", "string")},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec")},
    "DeploymentSpec": {
        1: ("replicas", "int"),
        2: ("selector", "LabelSelector"),
        3: ("template", "PodTemplateSpec"),
    },
    "JobSpec": {6: ("template", "PodTemplateSpec")},
    "JobTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "JobSpec")},
    "CronJobSpec": {1: ("schedule", "string"), 5: ("jobTemplate", "JobTemplateSpec")},
    "ServicePort": {
        1: ("name", "string"),
        2: ("protocol", "string"),
        3: ("port", "int"),
        4: ("targetPort", "IntOrString"),
        5: ("nodePort", "int"),
    },
    "ServiceSpec": {
        1: ("ports", "[]ServicePort"),
        2: ("selector", "map"),
        3: ("clusterIP", "string"),
        4: ("type", "string"),
        10: ("externalName", "string"),
    },
    "ResourceQuotaSpec": {1: ("hard", "quantitymap"), 2: ("scopes", "[]string")},
    "PodDisruptionBudgetSpec": {
        1: ("minAvailable", "IntOrString"),
        2: ("selector", "LabelSelector"),
        3: ("maxUnavailable", "IntOrString"),
    },
    "ServiceBackendPort": {1: ("name", "string"), 2: ("number", "int")},
    "IngressServiceBackend": {1: ("name", "string"), 2: ("port", "ServiceBackendPort")},
    "IngressBackend": {4: ("service", "IngressServiceBackend")},
    "IngressTLS": {1: ("hosts", "[]string"), 2: ("secretName", "string")},
    "HTTPIngressPath": {
        1: ("path", "string"),
        2: ("backend", "IngressBackend"),
        3: ("pathType", "string"),
    },
    "HTTPIngressRuleValue": {1: ("paths", "[]HTTPIngressPath")},
    "IngressRuleValue": {1: ("http", "HTTPIngressRuleValue")},
    "IngressRule": {1: ("host", "string"), 2: ("", "IngressRuleValue")},  # inlined in JSON
    "IngressSpec": {
        1: ("defaultBackend", "IngressBackend"),
        2: ("tls", "[]IngressTLS"),
        3: ("rules", "[]IngressRule"),
        4: ("ingressClassName", "string"),
    },
    # client-go's leader election (LeaseLock) with protobuf, as controller-runtime sets it up;
    # every field is a pointer ("?"): sent when set, even "" or 0 (a release sends both).
    "LeaseSpec": {
        1: ("holderIdentity", "?string"),
        2: ("leaseDurationSeconds", "?int"),
        3: ("acquireTime", "MicroTime"),
        4: ("renewTime", "MicroTime"),
        5: ("leaseTransitions", "?int"),
        6: ("strategy", "?string"),
        7: ("preferredHolder", "?string"),
    },
}
_META = (1, ("metadata", "ObjectMeta"))
# (apiVersion, kind) → the object's fields (status is never read from a request).
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "Namespace"): dict([_META, (2, ("spec", "NamespaceSpec"))]),
    ("v1", "ConfigMap"): dict(
        [_META, (2, ("data", "map")), (3, ("binaryData", "bytesmap")), (4, ("immutable", "bool"))]
    ),
    ("v1", "Secret"): dict(
        [
            _META,
            (2, ("data", "bytesmap")),
            (3, ("type", "string")),
            (4, ("stringData", "map")),
            (5, ("immutable", "bool")),
        ]
    ),
    ("v1", "ServiceAccount"): dict(
        [
            _META,
            (2, ("secrets", "[]ObjectReference")),
            (3, ("imagePullSecrets", "[]LocalObjectReference")),
            (4, ("automountServiceAccountToken", "bool")),
        ]
    ),
    ("rbac.authorization.k8s.io/v1", "Role"): dict([_META, (2, ("rules", "[]PolicyRule"))]),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): dict([_META, (2, ("rules", "[]PolicyRule"))]),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): dict(
        [_META, (2, ("subjects", "[]Subject")), (3, ("roleRef", "RoleRef"))]
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): dict(
        [_META, (2, ("subjects", "[]Subject")), (3, ("roleRef", "RoleRef"))]
    ),
    ("authentication.k8s.io/v1", "TokenRequest"): dict([_META, (2, ("spec", "TokenRequestSpec"))]),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): dict(
        [_META, (2, ("spec", "SelfSubjectAccessReviewSpec"))]
    ),
    ("apps/v1", "Deployment"): dict([_META, (2, ("spec", "DeploymentSpec"))]),
    ("v1", "Service"): dict([_META, (2, ("spec", "ServiceSpec"))]),
    ("batch/v1", "Job"): dict([_META, (2, ("spec", "JobSpec"))]),
    ("batch/v1", "CronJob"): dict([_META, (2, ("spec", "CronJobSpec"))]),
    ("scheduling.k8s.io/v1", "PriorityClass"): dict(
        [
            _META,
            (2, ("value", "int")),
            (3, ("globalDefault", "bool")),
            (4, ("description", "string")),
            (5, ("preemptionPolicy", "string")),
        ]
    ),
    ("v1", "ResourceQuota"): dict([_META, (2, ("spec", "ResourceQuotaSpec"))]),
    ("policy/v1", "PodDisruptionBudget"): dict([_META, (2, ("spec", "PodDisruptionBudgetSpec"))]),
    ("networking.k8s.io/v1", "Ingress"): dict([_META, (2, ("spec", "IngressSpec"))]),
    ("coordination.k8s.io/v1", "Lease"): dict([_META, (2, ("spec", "LeaseSpec"))]),
}
