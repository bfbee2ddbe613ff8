#!/usr/bin/env bash
# Install and try the Widget operator on a real cluster (the one your kubeconfig names).
#
# What it needs:
#   - kubectl, with a current context on a cluster where you may create namespaces, CRDs,
#     RBAC and admission webhook registrations (kind, k3d, minikube or a real one);
#   - openssl (for a CA and the webhook's serving certificate);
#   - the operator image, reachable by the cluster's nodes. By default it is built with
#     `make image` (docker, podman or buildah) as widgets:local; on kind, set
#     KIND_CLUSTER=<name> to load it into the nodes (docker), otherwise push it somewhere and set IMAGE=<registry>/widgets:<tag> (SKIP_BUILD=1 to
#     use an image that exists already);
#   - this repository installed (`make install`), run from its root.
# The Widget's own workload uses registry.k8s.io/e2e-test-images/agnhost, pulled by the nodes.
#
# Settings (environment): NAMESPACE (widgets), IMAGE (widgets:local), KIND_CLUSTER,
# SKIP_BUILD, PYTHON (.venv/bin/python), WORKDIR (a new temporary directory for the certs).
# Remove everything afterwards with:
#   CLOUDCOIL_NAMESPACE=widgets .venv/bin/python examples/widget_operator.py uninstall --include-crds
set -euo pipefail

NAMESPACE=${NAMESPACE:-widgets}
IMAGE=${IMAGE:-widgets:local}
PYTHON=${PYTHON:-.venv/bin/python}
SERVICE="widgets.${NAMESPACE}.svc"

say() { printf '\n== %s\n' "$*"; }
need() { command -v "$1" >/dev/null || { echo "demo.sh needs $1: $2" >&2; exit 1; }; }

need kubectl "install it and point your kubeconfig at a cluster"
need openssl "install it to create the webhook's TLS credentials"
[ -x "$PYTHON" ] || { echo "demo.sh needs $PYTHON: run 'make install' first" >&2; exit 1; }
[ -f examples/widget_operator.py ] || { echo "run demo.sh from the repository root" >&2; exit 1; }
kubectl version >/dev/null 2>&1 || {
    echo "kubectl cannot reach a cluster (context: $(kubectl config current-context 2>&1))" >&2
    exit 1
}
say "Cluster: $(kubectl config current-context), namespace ${NAMESPACE}, image ${IMAGE}"

if [ -z "${SKIP_BUILD:-}" ]; then
    need make "install it, or build the image elsewhere and set SKIP_BUILD=1 IMAGE=..."
    say "Building ${IMAGE}"
    make image IMAGE="$IMAGE"   # docker, podman or buildah (docker/Dockerfile)
    if [ -n "${KIND_CLUSTER:-}" ]; then
        need kind "install it, or unset KIND_CLUSTER and push the image"
        kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"
    fi
fi

WORKDIR=${WORKDIR:-$(mktemp -d)}
say "Creating a CA and a serving certificate for ${SERVICE} in ${WORKDIR}"
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=widgets-demo-ca" \
    -keyout "$WORKDIR/ca.key" -out "$WORKDIR/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=${SERVICE}" \
    -keyout "$WORKDIR/tls.key" -out "$WORKDIR/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:widgets.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$SERVICE" "$NAMESPACE" >"$WORKDIR/san.ext"
openssl x509 -req -in "$WORKDIR/tls.csr" -CA "$WORKDIR/ca.crt" -CAkey "$WORKDIR/ca.key" \
    -CAcreateserial -days 365 -extfile "$WORKDIR/san.ext" -out "$WORKDIR/tls.crt" 2>/dev/null

say "Namespace ${NAMESPACE} and Secret widgets-tls (created before install)"
kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$NAMESPACE" create secret tls widgets-tls \
    --cert "$WORKDIR/tls.crt" --key "$WORKDIR/tls.key" --dry-run=client -o yaml | kubectl apply -f -

say "Installing the operator (CRD, RBAC, Service, Deployment; webhooks once it is available)"
CLOUDCOIL_NAMESPACE="$NAMESPACE" "$PYTHON" examples/widget_operator.py install \
    --image "$IMAGE" --ca-file "$WORKDIR/ca.crt" --timeout 300

say "Creating widget/hello"
kubectl -n "$NAMESPACE" apply -f - <<'YAML'
apiVersion: examples.cloudcoil.dev/v1alpha1
kind: Widget
metadata:
  name: hello
spec:
  message: Hello from cloudcoil_sync
  replicas: 2
YAML

say "Waiting for widget/hello to be Ready"
kubectl -n "$NAMESPACE" wait widget/hello --for=condition=Ready --timeout=300s || true
kubectl -n "$NAMESPACE" get widgets
kubectl -n "$NAMESPACE" get widget hello \
    -o jsonpath='{range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}'
kubectl -n "$NAMESPACE" get configmaps,deployments,services -l app.kubernetes.io/instance=hello
kubectl -n "$NAMESPACE" get widget hello -o jsonpath='{.metadata.labels}{"\n"}'

say "Admission: a policy of at most 3 replicas, then a Widget asking for 5 (denied)"
kubectl -n "$NAMESPACE" create configmap widget-policy --from-literal=maxReplicas=3 \
    --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$NAMESPACE" apply -f - <<'YAML' || true
apiVersion: examples.cloudcoil.dev/v1alpha1
kind: Widget
metadata:
  name: too-big
spec:
  replicas: 5
YAML

say "Done. Remove it with: CLOUDCOIL_NAMESPACE=${NAMESPACE} ${PYTHON} examples/widget_operator.py uninstall --include-crds"
