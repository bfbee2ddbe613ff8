"""The column definitions of kube-apiserver 1.32's Table printers for common built-in kinds.

Data, copied from its recorded Table answers (tests/testing/kube_apiserver_tables/); the cells
are computed in ``printers.py``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AGE", "COLUMNS", "NAME"]

NAME: dict[str, Any] = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": (
        "Name must be unique within a namespace. Is required when creating "
        "resources, although some resources may allow a client to request the "
        "generation of an appropriate name automatically. Name is primarily "
        "intended for creation idempotence and configuration definition. Cannot "
        "be updated. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
    ),
    "priority": 0,
}
AGE: dict[str, Any] = {
    "name": "Age",
    "type": "string",
    "format": "",
    "description": (
        "CreationTimestamp is a timestamp representing the server time when this "
        "object was created. It is not guaranteed to be set in happens-before "
        "order across separate operations. Clients may not set this value. It is "
        "represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
        "Read-only. Null for lists. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    ),
    "priority": 0,
}
# (group, plural) -> the columns but Name and Age: priority 0 ones print before Age, the others
# (``-o wide``) after it.
COLUMNS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("", "configmaps"): [
        {
            "name": "Data",
            "type": "string",
            "format": "",
            "description": (
                "Data contains the configuration data. Each key must consist of "
                "alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte "
                "sequences must use the BinaryData field. The keys stored in Data must "
                "not overlap with the keys in the BinaryData field, this is enforced "
                "during validation process."
            ),
            "priority": 0,
        },
    ],
    ("", "secrets"): [
        {
            "name": "Type",
            "type": "string",
            "format": "",
            "description": (
                "Used to facilitate programmatic handling of secret data. More info: "
                "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
            ),
            "priority": 0,
        },
        {
            "name": "Data",
            "type": "string",
            "format": "",
            "description": (
                "Data contains the secret data. Each key must consist of alphanumeric "
                "characters, '-', '_' or '.'. The serialized form of the secret data is a "
                "base64 encoded string, representing the arbitrary (possibly non-string) "
                "data value here. Described in "
                "https://tools.ietf.org/html/rfc4648#section-4"
            ),
            "priority": 0,
        },
    ],
    ("apps", "deployments"): [
        {
            "name": "Ready",
            "type": "string",
            "format": "",
            "description": "Number of the pod with ready state",
            "priority": 0,
        },
        {
            "name": "Up-to-date",
            "type": "string",
            "format": "",
            "description": (
                "Total number of non-terminated pods targeted by this deployment that "
                "have the desired template spec."
            ),
            "priority": 0,
        },
        {
            "name": "Available",
            "type": "string",
            "format": "",
            "description": (
                "Total number of available pods (ready for at least minReadySeconds) "
                "targeted by this deployment."
            ),
            "priority": 0,
        },
        {
            "name": "Containers",
            "type": "string",
            "format": "",
            "description": "Names of each container in the template.",
            "priority": 1,
        },
        {
            "name": "Images",
            "type": "string",
            "format": "",
            "description": "Images referenced by each container in the template.",
            "priority": 1,
        },
        {
            "name": "Selector",
            "type": "string",
            "format": "",
            "description": (
                "Label selector for pods. Existing ReplicaSets whose pods are selected by "
                "this will be the ones affected by this deployment."
            ),
            "priority": 1,
        },
    ],
    ("", "services"): [
        {
            "name": "Type",
            "type": "string",
            "format": "",
            "description": (
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid "
                "options are ExternalName, ClusterIP, NodePort, and LoadBalancer. "
                '"ClusterIP" allocates a cluster-internal IP address for load-balancing '
                "to endpoints. Endpoints are determined by the selector or if that is not "
                "specified, by manual construction of an Endpoints object or "
                'EndpointSlice objects. If clusterIP is "None", no virtual IP is '
                "allocated and the endpoints are published as a set of endpoints rather "
                'than a virtual IP. "NodePort" builds on ClusterIP and allocates a port '
                "on every node which routes to the same endpoints as the clusterIP. "
                '"LoadBalancer" builds on NodePort and creates an external load-balancer '
                "(if supported in the current cloud) which routes to the same endpoints "
                'as the clusterIP. "ExternalName" aliases this service to the specified '
                "externalName. Several other fields do not apply to ExternalName "
                "services. More info: "
                "https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"
            ),
            "priority": 0,
        },
        {
            "name": "Cluster-IP",
            "type": "string",
            "format": "",
            "description": (
                "clusterIP is the IP address of the service and is usually assigned "
                "randomly. If an address is specified manually, is in-range (as per "
                "system configuration), and is not in use, it will be allocated to the "
                "service; otherwise creation of the service will fail. This field may not "
                "be changed through updates unless the type field is also being changed "
                "to ExternalName (which requires this field to be blank) or the type "
                "field is being changed from ExternalName (in which case this field may "
                'optionally be specified, as describe above).  Valid values are "None", '
                'empty string (""), or a valid IP address. Setting this to "None" makes a '
                '"headless service" (no virtual IP), which is useful when direct endpoint '
                "connections are preferred and proxying is not required.  Only applies to "
                "types ClusterIP, NodePort, and LoadBalancer. If this field is specified "
                "when creating a Service of type ExternalName, creation will fail. This "
                "field will be wiped when updating a Service to type ExternalName. More "
                "info: "
                "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
            ),
            "priority": 0,
        },
        {
            "name": "External-IP",
            "type": "string",
            "format": "",
            "description": (
                "externalIPs is a list of IP addresses for which nodes in the cluster "
                "will also accept traffic for this service.  These IPs are not managed by "
                "Kubernetes.  The user is responsible for ensuring that traffic arrives "
                "at a node with this IP.  A common example is external load-balancers "
                "that are not part of the Kubernetes system."
            ),
            "priority": 0,
        },
        {
            "name": "Port(s)",
            "type": "string",
            "format": "",
            "description": (
                "The list of ports that are exposed by this service. More info: "
                "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
            ),
            "priority": 0,
        },
        {
            "name": "Selector",
            "type": "string",
            "format": "",
            "description": (
                "Route service traffic to pods with label keys and values matching this "
                "selector. If empty or not present, the service is assumed to have an "
                "external process managing its endpoints, which Kubernetes will not "
                "modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. "
                "Ignored if type is ExternalName. More info: "
                "https://kubernetes.io/docs/concepts/services-networking/service/"
            ),
            "priority": 1,
        },
    ],
    ("", "pods"): [
        {
            "name": "Ready",
            "type": "string",
            "format": "",
            "description": "The aggregate readiness state of this pod for accepting traffic.",
            "priority": 0,
        },
        {
            "name": "Status",
            "type": "string",
            "format": "",
            "description": "The aggregate status of the containers in this pod.",
            "priority": 0,
        },
        {
            "name": "Restarts",
            "type": "string",
            "format": "",
            "description": (
                "The number of times the containers in this pod have been restarted and "
                "when the last container in this pod has restarted."
            ),
            "priority": 0,
        },
        {
            "name": "IP",
            "type": "string",
            "format": "",
            "description": (
                "podIP address allocated to the pod. Routable at least within the "
                "cluster. Empty if not yet allocated."
            ),
            "priority": 1,
        },
        {
            "name": "Node",
            "type": "string",
            "format": "",
            "description": (
                "NodeName indicates in which node this pod is scheduled. If empty, this "
                "pod is a candidate for scheduling by the scheduler defined in "
                "schedulerName. Once this field is set, the kubelet for this node becomes "
                "responsible for the lifecycle of this pod. This field should not be used "
                "to express a desire for the pod to be scheduled on a specific node. "
                "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"
            ),
            "priority": 1,
        },
        {
            "name": "Nominated Node",
            "type": "string",
            "format": "",
            "description": (
                "nominatedNodeName is set only when this pod preempts other pods on the "
                "node, but it cannot be scheduled right away as preemption victims "
                "receive their graceful termination periods. This field does not "
                "guarantee that the pod will be scheduled on this node. Scheduler may "
                "decide to place the pod elsewhere if other nodes become available "
                "sooner. Scheduler may also decide to give the resources on this node to "
                "a higher priority pod that is created after preemption. As a result, "
                "this field may be different than PodSpec.nodeName when the pod is "
                "scheduled."
            ),
            "priority": 1,
        },
        {
            "name": "Readiness Gates",
            "type": "string",
            "format": "",
            "description": (
                "If specified, all readiness gates will be evaluated for pod readiness. A "
                "pod is ready when all its containers are ready AND all conditions "
                'specified in the readiness gates have status equal to "True" More info: '
                "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"
            ),
            "priority": 1,
        },
    ],
    ("", "namespaces"): [
        {
            "name": "Status",
            "type": "string",
            "format": "",
            "description": "The status of the namespace",
            "priority": 0,
        },
    ],
}
