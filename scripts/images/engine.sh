#!/usr/bin/env bash
# A private Docker engine for building and running Fountain's images on a machine with no image
# registry and no container network: `dockerd --bridge=none --iptables=false` (no docker0 bridge, no
# private address, no iptables rule), so every build and container uses `--network host` and all
# traffic stays on this machine. Its data root is .cache/docker (kept between runs: the build cache),
# its socket .cache/docker/docker.sock; it never touches a system engine.
# Usage: scripts/images/engine.sh start   prints `export DOCKER_HOST=…` once the engine answers
#        scripts/images/engine.sh stop    stops the engine this script started, by its pid
# Needs: root, dockerd and docker (Debian's docker.io).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STATE="$REPO/.cache/docker"
SOCK="$STATE/docker.sock"
PIDFILE="$STATE/dockerd.pid"
# containerd's sockets live under the exec root, and a unix socket path has at most 107 bytes.
EXEC_ROOT=/run/fountain-dockerd-$(printf %s "$STATE" | sha256sum | cut -c1-8)
say() { echo "engine: $*" >&2; }

case "${1:-}" in
  start)
    for tool in dockerd docker; do command -v "$tool" >/dev/null || { say "missing $tool (Debian: docker.io)"; exit 1; }; done
    mkdir -p "$STATE/data"
    if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      say "already running (pid $(cat "$PIDFILE"))"
    else
      dockerd --bridge=none --iptables=false --ip-masq=false \
        --data-root "$STATE/data" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
        -H "unix://$SOCK" >"$STATE/dockerd.log" 2>&1 &
      pid=$!
      for _ in $(seq 1 120); do
        DOCKER_HOST="unix://$SOCK" docker version >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || { say "dockerd exited:"; tail -n 20 "$STATE/dockerd.log" >&2; exit 1; }
        sleep 0.5
      done
      DOCKER_HOST="unix://$SOCK" docker version >/dev/null 2>&1 || { say "dockerd did not answer in 60 s"; exit 1; }
      say "dockerd pid $pid on $SOCK"
    fi
    echo "export DOCKER_HOST=unix://$SOCK"
    ;;
  stop)
    [ -s "$PIDFILE" ] || { say "not running"; exit 0; }
    pid=$(cat "$PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      if kill -0 "$pid" 2>/dev/null; then say "dockerd $pid did not stop in 30 s; killing it"; kill -KILL "$pid"; fi
      say "dockerd $pid stopped"
    fi
    rm -f "$PIDFILE"
    # The exec root holds only the stopped engine's runtime state (containerd's sockets, the host
    # network namespace's bind mount), which it leaves behind.
    if ! kill -0 "$pid" 2>/dev/null && [ -d "$EXEC_ROOT" ]; then
      { grep -o " $EXEC_ROOT/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount "$m" || true; done
      rm -rf "$EXEC_ROOT"
    fi
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
