"""Test support: an in-process Kubernetes API emulator and pytest fixtures.

``Emulator`` serves the Kubernetes REST API over real HTTP or HTTPS on 127.0.0.1 from threads
it owns::

    with Emulator() as kube:                     # HTTPS, random port, per-process test CA
        config = kube.config(namespace="default")
        token = kube.service_account_token("default", "operator")   # RBAC applies to it
        kube.faults.inject(503, count=2, method="GET")
        kube.drop_watches(); kube.forget_history(); kube.restart()
        kube.route_service("operators", "webhook", "127.0.0.1", 9443)  # admission webhooks

Behaviour follows kube-apiserver 1.32 as recorded in ``kube-apiserver-1.32/`` (status codes,
``Status`` bodies, watch events, managedFields, generation rules, RBAC messages). Simplifications:

- Storage is in memory; one global integer resourceVersion counter. Every write of any kind
  bumps it. The watch history is a bounded list (``history_size`` events); older
  resourceVersions get ``410 Expired`` as a watch ERROR event, as etcd compaction causes; an
  open watch that falls behind the history (or outlives ``forget_history``) ends the same way.
- Only one version per group is served for built-in kinds. Custom resources are stored once;
  a CRD with ``conversion.strategy: Webhook`` has its conversion webhook called over HTTPS
  (one object per ConversionReview, for lists too); with ``None`` only the apiVersion
  changes.
- Validation covers ObjectMeta on every kind as kube-apiserver 1.32 does (``object_meta.py``:
  names and generateName, label keys and values, annotation keys and total size, owner
  references, finalizer names), ConfigMap and Secret keys (a Secret's ``stringData`` is
  merged into ``data`` and dropped, its type defaults to Opaque, a TLS Secret needs its two
  keys; a Secret's ``data`` and a ConfigMap's ``binaryData`` must be base64 as Go decodes it,
  else a 400 naming the byte, ``go_base64.py``), a Deployment's replicas, selector (it must
  match the template's labels) and containers' names and images
  (``deployment_validation.py``; the rest of the pod spec is not validated), required
  ``eventTime`` for events.k8s.io Events, CRD naming; a create carrying a resourceVersion is
  refused (500);
  built-in kinds get no defaulting except Deployment/Pod
  specs, Namespaces and CRDs. Custom resources are pruned, defaulted and validated against
  their CRD's structural schema as kube-apiserver 1.32 does (``custom.py``: unknown-field
  warnings and strict errors, types, formats, bounds, patterns, enums, list types, ``/scale``
  paths) and their CEL rules (``cel_rules.py``, with cel-expr-python from the ``testing``
  extra: without it CRDs carrying rules are refused), checked field for field against its
  recorded answers in ``tests/recordings/fidelity``; one object's property errors come in
  schema order (kube-apiserver's order is random). No CEL cost budget; ratcheting by value
  equality at each error's path (``ratcheting.py``).
  ValidatingAdmissionPolicies and bindings are evaluated by the same engine
  (``policies.py``; no ``paramKind``/``paramRef``).
- managedFields of built-in kinds use a small schema table (keyed lists such as containers/env/
  conditions/ownerReferences, set lists such as finalizers, atomic structs such as selector)
  instead of OpenAPI; other lists are atomic. Custom resources follow their CRD schema's
  ``x-kubernetes-list-type``/``x-kubernetes-list-map-keys``. Strategic merge patch (built-in
  kinds only, as kube) merges lists by a similar table of merge keys (``strategic.py``).
- Server-side apply merges the applied configuration (keyed lists by key) and removes fields the
  manager stopped applying when nobody else owns them; conflicts are reported like kube's.
- Garbage collection, namespace finalization and CRD establishment run on one controller thread
  right after the triggering write (kube-controller-manager does it asynchronously, typically
  within tens of milliseconds). A CRD's kinds are served as soon as its create returns; the
  NamesAccepted/Established conditions follow a few milliseconds later. Deleting a CRD deletes
  its objects.
- No graceful deletion for pods (deletionGracePeriodSeconds is always 0), no admission plugins
  (LimitRanger, quotas, service account token minting), no aggregated API servers, no
  field selectors beyond equality on simple paths. Answers are JSON only; protobuf request
  bodies are decoded only for the kinds kubectl creates imperatively and for client-go's
  leader-election Lease (``protobuf.py``).
- Impersonation headers (user and groups) and SelfSubjectAccessReview are served from the
  same RBAC evaluation (``identity.py``).
- Discovery lists the kinds of the client's REST table plus CRDs; verbs are the standard eight
  except for a few kinds (bindings, componentstatuses, namespaces, reviews); aggregated
  discovery (v2) is served for /api and /apis. Subresources served: status, scale, finalize,
  serviceaccounts/token.
- For kubectl: OpenAPI v3 documents generated from the served types (CRD schemas; built-in
  kinds only typed at the top, see ``openapi.py``; no OpenAPI v2) and server-side tables
  (CRD printer columns; built-in kinds Name and Age only, see ``tables.py``), also on watches.
- Metadata-only reads (``Accept: ...;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1``, what
  client-go's metadata client and ``client.metadata`` send) on gets, lists and watches, with
  kube-apiserver's 406 for a mismatched form (``partial.py``); writes answer whole objects.
- Authentication is by bearer token only: the admin token bypasses authorization; other tokens
  come from ``add_token``/``service_account_token`` or a ServiceAccount's TokenRequest
  (opaque, never expiring: see ``tokens.py``). RBAC is evaluated from the stored Roles,
  ClusterRoles and bindings (aggregated ClusterRoles are not expanded); discovery, /version and
  health endpoints are open to every authenticated user.
- Admission webhooks registered by Mutating/ValidatingWebhookConfigurations are called over
  HTTPS for writes made over HTTP only (not for the emulator's own controllers, ``/scale``
  or ``deletecollection`` items); Services are reached through ``route_service`` and
  ``matchPolicy`` is always Exact (details in ``admission.py``). Deployment
  status is only written when ``Emulator(deployments=...)`` enables the simulator in
  ``rollout.py``; otherwise it changes only through ``/status`` writes.
- Namespaces must exist before objects are created in them (``default``, ``kube-system``,
  ``kube-public`` and ``kube-node-lease`` are pre-created); ``require_namespaces=False`` lifts
  that.
- An idle watch notices a departed client within ~2 s (a readable socket during a stream is
  taken as the client closing: clients send nothing while watching); ``restart()`` keeps the
  objects and the port, cuts connections and, by default, forgets the watch history.
- ``python -m cloudcoil_sync.testing serve`` serves one emulator for kubectl and the operator
  CLI, with an admin kubeconfig and an optional state file (``serve.py``, ``state.py``).
- Paginated lists read the objects after the continue key at the time of each page (no
  snapshot across pages); the reported resourceVersion is the first page's.
- Answers come in microseconds unless ``Emulator(latency="kube-apiserver-1.32")`` adds the
  per-verb service times and the concurrency of a real API server (``latency.py``): sleeps,
  not CPU, so an operator's own CPU competes with nothing it would compete with on a real
  control plane sharing its machine.
"""

from cloudcoil_sync.testing._internal.api import LogEntry
from cloudcoil_sync.testing._internal.emulator import Emulator
from cloudcoil_sync.testing._internal.faults import Faults, InjectedFault
from cloudcoil_sync.testing._internal.hooks import AdmissionHook, StoreObserver
from cloudcoil_sync.testing._internal.latency import PROFILES, LatencyModel
from cloudcoil_sync.testing._internal.operator import OperatorRunner
from cloudcoil_sync.testing._internal.round_trip import check_round_trip
from cloudcoil_sync.testing._internal.status import ApiError
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

__all__ = [
    "PROFILES",
    "AdmissionHook",
    "ApiError",
    "CertificateAuthority",
    "Emulator",
    "Faults",
    "InjectedFault",
    "LatencyModel",
    "LogEntry",
    "OperatorRunner",
    "StoreObserver",
    "check_round_trip",
]
