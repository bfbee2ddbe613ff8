#!/usr/bin/env bash
# End to end on a real node: build the Widget operator image, run docker/demo.sh against the
# kube-control-plane kit's node (../shared/kube-control-plane, "A real node") and check the
# outcome. Not run by CI (it needs the kit's control plane and node running); CI lints it.
#
#   eval "$(KIT/node-start.sh)"; make install
#   timeout 900 docker/e2e-node.sh 2>&1 | tee e2e.log
#
# Checks (each prints its figure; the exit status is 1 if any fails):
#   - the demo converges (widget/hello Ready);
#   - the operator Deployment is Available <= 6 s after its creation;
#   - with 2 replicas, deleting the leader's Pod hands the Lease to the other <= 3 s later;
#   - a rolling update of the 2 replicas under admission traffic fails 0 requests;
#   - uninstall --include-crds leaves nothing it installed.
#   - the optional objects (PodDisruptionBudget, NetworkPolicy; cert-manager's if
#     CERT_MANAGER_CRDS names a directory of its CRDs, applied for the check and deleted) and
#     the manifests --split layout are accepted by the API server (server-side dry run).
# Settings (environment): KIT (../shared/kube-control-plane), KUBE_HOME (the kit's default),
# BUILD (podman if installed, else kit: the kit's node-image.sh recipe), NAMESPACE
# (e2e-widgets, deleted first and at the end unless KEEP=1), PYTHON (.venv/bin/python),
# IMAGE (localhost/example/widgets:e2e with podman, example/widgets:e2e with the kit).
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
cd "$ROOT"
KIT=${KIT:-$ROOT/../shared/kube-control-plane}
KUBE_HOME=${KUBE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-control-plane}
export KUBE_HOME
export KUBECONFIG=${KUBECONFIG:-$KUBE_HOME/admin.kubeconfig}
export PATH=$KUBE_HOME/bin:$PATH
NAMESPACE=${NAMESPACE:-e2e-widgets}
PYTHON=${PYTHON:-.venv/bin/python}
APP=widgets
if [ -z "${BUILD:-}" ]; then
    if command -v podman >/dev/null; then BUILD=podman; else BUILD=kit; fi
fi
case $BUILD in
    podman) IMAGE=${IMAGE:-localhost/example/widgets:e2e} ;;
    kit) IMAGE=${IMAGE:-example/widgets:e2e} ;;
    *) echo "e2e-node.sh: BUILD must be podman or kit, not '$BUILD'" >&2; exit 2 ;;
esac
CTR_SOCK=$KUBE_HOME/node/run/containerd.sock
FAILED=0
T0=$(date +%s.%N)

say() { printf '\n== [%5.1fs] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
fail() { echo "e2e-node.sh: $*" >&2; exit 1; }
check() { # check NAME OK(0/1) FIGURE
    if [ "$2" = 1 ]; then printf 'PASS  %-46s %s\n' "$1" "$3"; else printf 'FAIL  %-46s %s\n' "$1" "$3"; FAILED=1; fi
    printf '%s\t%s\t%s\n' "$([ "$2" = 1 ] && echo PASS || echo FAIL)" "$1" "$3" >> "$WORK/figures"
}
k() { kubectl -n "$NAMESPACE" "$@"; }
now() { date +%s.%N; }
seconds() { echo "scale=2; ($2 - $1) / 1" | bc; }
epoch() { date -d "$1" +%s; } # an RFC 3339 timestamp (whole seconds)
operator() { CLOUDCOIL_NAMESPACE=$NAMESPACE "$PYTHON" examples/widget_operator.py "$@"; }

[ -d "$KIT" ] || fail "the kit is not at $KIT (set KIT)"
command -v kubectl >/dev/null || fail "kubectl missing: run the kit's build.sh (KUBE_HOME=$KUBE_HOME)"
command -v bc >/dev/null || fail "bc missing (apt-get install bc)"
[ -x "$PYTHON" ] || fail "$PYTHON missing: run 'make install' first"
kubectl get node -o name 2>/dev/null | grep -q . || fail "no node: run \"eval \$($KIT/node-start.sh)\""
[ -S "$CTR_SOCK" ] || fail "the node's containerd socket $CTR_SOCK is missing (node-start.sh)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/e2e-node.XXXXXX")
: > "$WORK/figures"

say "Image $IMAGE (build: $BUILD)"
if [ "$BUILD" = podman ]; then
    # The kit's Debian base, as podman wants it (an import of its layer: podman cannot build
    # on the kit's archive, which has no layer history).
    if ! podman image exists localhost/kube-node/python:3.11; then
        [ -f "$KUBE_HOME/images/layers/python-base.tar" ] || fail "run $KIT/node-image.sh base first"
        podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'ENV LANG=C.UTF-8' "$KUBE_HOME/images/layers/python-base.tar" \
            localhost/kube-node/python:3.11 >/dev/null
    fi
    b0=$(now)
    make -s image ENGINE=podman IMAGE="$IMAGE" BASE=localhost/kube-node/python:3.11 \
        BUILD_FLAGS="--isolation=chroot --quiet" >"$WORK/build.log" 2>&1 \
        || { tail -20 "$WORK/build.log" >&2; fail "make image failed"; }
    podman save --quiet --format docker-archive -o "$WORK/operator.tar" "$IMAGE"
    ctr --address "$CTR_SOCK" --namespace k8s.io images import "$WORK/operator.tar" >/dev/null
    echo "built with podman $(podman version --format '{{.Client.Version}}') from docker/Dockerfile in $(seconds "$b0" "$(now)") s, imported into the node's containerd"
else
    "$KIT/node-image.sh" operator "$ROOT" "$IMAGE" 2>&1 | tail -2
fi
STANDIN=$(sed -n 's/^IMAGE = "\(.*\)"$/\1/p' examples/widget_operator.py)
if ! ctr --address "$CTR_SOCK" --namespace k8s.io images ls -q | grep -q "$STANDIN\$"; then
    "$KIT/node-image.sh" standin "$STANDIN" 2>&1 | tail -1
fi

say "Namespace $NAMESPACE, fresh"
kubectl delete namespace "$NAMESPACE" --ignore-not-found --wait=true --timeout=120s >/dev/null
CLOUDCOIL_NAMESPACE=$NAMESPACE "$PYTHON" examples/widget_operator.py uninstall --include-crds -q \
    >/dev/null 2>&1 || true   # a previous run's cluster-scoped objects

say "docker/demo.sh"
d0=$(now)
NAMESPACE=$NAMESPACE IMAGE=$IMAGE SKIP_BUILD=1 PYTHON=$PYTHON WORKDIR=$WORK \
    docker/demo.sh >"$WORK/demo.log" 2>&1 || { cat "$WORK/demo.log"; fail "demo.sh failed"; }
demo_s=$(seconds "$d0" "$(now)")
grep -E "^(applied|installed|waiting for Deployment|Deployment .* available|created Lease)|is available: done" "$WORK/demo.log" || true
ready=$(k get widget hello -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
check "demo converges (widget/hello Ready)" "$([ "$ready" = True ] && echo 1 || echo 0)" "Ready=$ready, demo.sh ${demo_s} s"

created=$(k get deployment "$APP" -o jsonpath='{.metadata.creationTimestamp}')
available=$(k get deployment "$APP" -o jsonpath='{.status.conditions[?(@.type=="Available")].lastTransitionTime}')
avail_s=$(( $(epoch "$available") - $(epoch "$created") ))
waited=$(sed -n 's/^Deployment .* is available: done in \([0-9.]*\) s$/\1/p' "$WORK/demo.log" | head -1)
pod=$(k get pods -l app.kubernetes.io/name=$APP -o jsonpath='{.items[0].metadata.name}')
started=$(k get pod "$pod" -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')
pod_ready=$(k get pod "$pod" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
check "Deployment Available <= 6 s after creation" "$([ "$avail_s" -le 6 ] && echo 1 || echo 0)" \
    "${avail_s} s (timestamps, whole seconds); install waited ${waited:-?} s; Pod Ready $(( $(epoch "$pod_ready") - $(epoch "$started") )) s after its container started"

say "Optional objects and the Kustomize layout, accepted by the API server (server-side dry run)"
EXTRAS=(--pod-disruption-budget --network-policy --api-server-cidr 10.244.0.1/32 --metrics-namespace kube-system)
operator manifests --image "$IMAGE" --ca-file "$WORK/ca.crt" --replicas 2 "${EXTRAS[@]}" \
    --split "$WORK/split" 2>/dev/null
rendered=$(kubectl kustomize "$WORK/split" | grep -c '^kind:')
dry=$(kubectl apply --dry-run=server -k "$WORK/split" 2>&1) && dry_ok=1 || dry_ok=0
echo "$dry" | grep -E "poddisruptionbudget|networkpolicy" || echo "$dry" | tail -3
cm_note="cert-manager: not checked (set CERT_MANAGER_CRDS to a directory of its CRDs)"
if [ -n "${CERT_MANAGER_CRDS:-}" ]; then
    kubectl apply --server-side -f "$CERT_MANAGER_CRDS" >/dev/null
    kubectl wait --for=condition=Established crd/certificates.cert-manager.io crd/issuers.cert-manager.io --timeout=60s >/dev/null
    if cm=$(operator manifests --image "$IMAGE" --cert-manager | kubectl apply --dry-run=server -f - 2>&1); then
        cm_note="cert-manager: Issuer, Certificate, CA-injected webhooks accepted (its CRDs from $CERT_MANAGER_CRDS)"
    else
        dry_ok=0; cm_note="cert-manager: refused: $(echo "$cm" | grep -i error | head -2)"
    fi
    echo "$cm" | grep -E "issuer|certificate|webhookconfiguration" || true
    kubectl delete -f "$CERT_MANAGER_CRDS" --wait=true >/dev/null
fi
check "optional objects accepted by the API server" "$dry_ok" \
    "--split: $rendered objects via kubectl kustomize, dry-run $([ "$dry_ok" = 1 ] && echo ok || echo refused); $cm_note"

say "Two replicas, with a PodDisruptionBudget and a NetworkPolicy"
operator install --image "$IMAGE" --ca-file "$WORK/ca.crt" --replicas 2 "${EXTRAS[@]}" --timeout 180 2>"$WORK/replicas.log" \
    || { cat "$WORK/replicas.log"; fail "install --replicas 2 failed"; }
grep -E "is available: done|PodDisruptionBudget|NetworkPolicy" "$WORK/replicas.log" || true

say "Leader Pod deleted"
holder=$(k get lease "$APP" -o jsonpath='{.spec.holderIdentity}')
leader=${holder%%_*}
[ -n "$leader" ] || fail "no Lease holder"
h0=$(now)
k delete pod "$leader" --wait=false >/dev/null
new=""
while [ "$(echo "$(seconds "$h0" "$(now)") < 30" | bc)" = 1 ]; do
    new=$(k get lease "$APP" -o jsonpath='{.spec.holderIdentity}')
    if [ -n "$new" ] && [ "$new" != "$holder" ]; then break; fi
    new=""
done
handover=$(seconds "$h0" "$(now)")
check "leader Pod deleted -> new holder <= 3 s" \
    "$([ -n "$new" ] && [ "$(echo "$handover <= 3" | bc)" = 1 ] && echo 1 || echo 0)" \
    "${handover} s (${leader} -> ${new%%_*}; from the delete request, polled with kubectl)"
k rollout status deployment/"$APP" --timeout=120s >/dev/null

say "Rolling update of 2 replicas under admission traffic"
cat >"$WORK/admission.py" <<'PY'
"""Dry-run Widget creates (mutating + validating webhooks, CEL) until the stop file appears."""
import os, sys, time
from cloudcoil_sync.client import ClientError, Config

namespace, stop = sys.argv[1], sys.argv[2]
config = Config.load(namespace=namespace, timeout=10, max_retries=0)  # no retry hides a failure
widgets = config.client(("examples.cloudcoil.dev", "v1alpha1", "widgets"))
ok, failures, n = 0, [], 0
while not os.path.exists(stop):
    n += 1
    body = {"apiVersion": "examples.cloudcoil.dev/v1alpha1", "kind": "Widget",
            "metadata": {"name": f"probe-{n}"}, "spec": {"message": "hi", "replicas": 1}}
    try:
        widgets.create(body, dry_run=True)
        ok += 1
    except ClientError as error:
        failures.append(f"{time.strftime('%H:%M:%S')} {error}")
    time.sleep(0.05)
print(f"{ok} {len(failures)}")
for failure in failures[:10]:
    print(failure, file=sys.stderr)
config.close()
PY
"$PYTHON" "$WORK/admission.py" "$NAMESPACE" "$WORK/stop" >"$WORK/admission.out" 2>"$WORK/admission.err" &
load=$!
sleep 2
r0=$(now)
k rollout restart deployment/"$APP" >/dev/null
k rollout status deployment/"$APP" --timeout=180s >/dev/null
rollout=$(seconds "$r0" "$(now)")
sleep 3
touch "$WORK/stop"
wait "$load"
read -r ok failed <"$WORK/admission.out"
cat "$WORK/admission.err" >&2
check "0 failed admission requests in a rolling update" "$([ "$failed" = 0 ] && [ "$ok" -gt 0 ] && echo 1 || echo 0)" \
    "${ok} succeeded, ${failed} failed; rollout ${rollout} s"

say "Memory and identity of a replica"
pod=$(k get pods -l app.kubernetes.io/name=$APP -o jsonpath='{.items[0].metadata.name}')
k exec "$pod" -- python3 -c 'import os; print("uid", os.getuid(), "gid", os.getgid()); print(open("/proc/1/status").read().split("VmRSS:")[1].split("\n")[0].strip(), "RSS of PID 1")' 2>/dev/null \
    || k exec "$pod" -- python -c 'import os; print("uid", os.getuid(), "gid", os.getgid())' 2>/dev/null || true

say "uninstall --include-crds"
OWNER="$NAMESPACE/$APP"
u0=$(now)
operator uninstall --include-crds --timeout 180 2>"$WORK/uninstall.log" || { cat "$WORK/uninstall.log"; fail "uninstall failed"; }
uninstall_s=$(seconds "$u0" "$(now)")
tail -1 "$WORK/uninstall.log"
cat >"$WORK/leftovers.py" <<'PY'
"""Names of listed objects that are this install's: its annotation, or its names."""
import json, sys

owner, app, namespace = sys.argv[1:4]
names = {app, f"{app}.{namespace}", f"{app}.{namespace}-metrics-reader",
         f"{app}.{namespace}.cloudcoil.io"}
found = []
for obj in json.load(sys.stdin)["items"]:
    meta = obj["metadata"]
    if (meta.get("annotations") or {}).get("cloudcoil.io/installed-by") == owner or meta["name"] in names:
        found.append(obj["kind"] + "/" + meta["name"])
print(" ".join(found))
PY
left=$(kubectl get crd,clusterrole,clusterrolebinding,mutatingwebhookconfigurations,validatingwebhookconfigurations -o json |
    "$PYTHON" "$WORK/leftovers.py" "$OWNER" "$APP" "$NAMESPACE")
left_ns=$(k get serviceaccount,role,rolebinding,service,deployment,lease,poddisruptionbudget,networkpolicy -o json |
    "$PYTHON" "$WORK/leftovers.py" "$OWNER" "$APP" "$NAMESPACE")
gone=$(kubectl get crd widgets.examples.cloudcoil.dev --ignore-not-found -o name)
check "uninstall leaves nothing it installed" "$([ -z "$left$left_ns$gone" ] && echo 1 || echo 0)" \
    "uninstall ${uninstall_s} s; left: ${left:-none}${left_ns:+ $left_ns}"

if [ -z "${KEEP:-}" ]; then
    kubectl delete namespace "$NAMESPACE" --wait=false >/dev/null
fi
say "Figures"
column -t -s $'\t' "$WORK/figures"
echo "logs: $WORK"
exit "$FAILED"
