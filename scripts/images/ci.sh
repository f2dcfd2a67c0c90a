#!/usr/bin/env bash
# CI's image stage: starts a private Docker engine (scripts/images/engine.sh: no bridge, no iptables,
# --network host everywhere), makes the local base images (scripts/images/build-base.sh), builds every
# image from its Dockerfile as written (the server, the runner, each hosted provider's sandbox image),
# runs each sandbox image's smoke.sh, then runs the given command (CI: `npm test`) with the engine up,
# so test/images-run.test.ts starts the server and runner containers and holds a conversation through
# them. A Dockerfile that does not build, or a smoke that fails, ends this with a non-zero status
# before the command runs. The engine is stopped by its pid however this ends.
# Usage: scripts/images/ci.sh [command...]   (root; Debian's docker.io and mmdebstrap installed)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
say() { echo "images: $*" >&2; }
took() { say "$1: $((SECONDS - $2)) s"; }
start=$SECONDS

engine_env=$(scripts/images/engine.sh start)
trap 'scripts/images/engine.sh stop' EXIT
eval "$engine_env"
export DOCKER_HOST
# Debian's docker.io client has no buildx; the engine's own builder does what these Dockerfiles need.
export DOCKER_BUILDKIT=0

t=$SECONDS
scripts/images/build-base.sh 20 22
took "base images" "$t"

build() { # build <tag> <base major> <docker build args...>
  local tag="$1" major="$2" t=$SECONDS
  shift 2
  local log="$REPO/.cache/images/build-${tag%%:*}.log"
  docker build --network host --build-arg "BASE_IMAGE=fountain-ci/node:$major-bookworm-slim" -t "$tag" "$@" >"$log" 2>&1 \
    || { tail -n 40 "$log" >&2; say "building $tag failed (docker build $*; the whole output is in $log)"; return 1; }
  took "$tag" "$t"
}
build fountain-server:ci 20 -f Dockerfile .
build fountain-runner:ci 20 -f Dockerfile.runner .

# shellcheck source=../sandbox-image/lib.sh
. scripts/sandbox-image/lib.sh
for provider in e2b daytona sprites; do
  t=$SECONDS
  DOCKER_NETWORK=host docker_smoke "$provider" --build-arg BASE_IMAGE=fountain-ci/node:22-bookworm-slim \
    >"$REPO/.cache/images/smoke-$provider.log" 2>&1 \
    || { tail -n 60 "$REPO/.cache/images/smoke-$provider.log" >&2; say "images/$provider: build or smoke failed (output: .cache/images/smoke-$provider.log)"; exit 1; }
  grep -E '^(ok|FAIL) ' "$REPO/.cache/images/smoke-$provider.log" | sed "s/^/images: $provider smoke: /" >&2
  took "images/$provider (build and smoke)" "$t"
done
# Untagged images are both earlier builds' leftovers and the cache of the stages no tag points at
# (the server's dependency and build stages): only those unused for a week go, so the kept data root
# stays bounded while a commit that changes no dependency reuses the npm ci layer.
docker image prune --force --filter until=168h >/dev/null
took "image stage" "$start"

if [ $# -gt 0 ]; then
  # The containers test fails instead of skipping when these are set and the images are missing.
  export FOUNTAIN_IMAGE_TESTS=1 FOUNTAIN_SERVER_IMAGE=fountain-server:ci FOUNTAIN_RUNNER_IMAGE=fountain-runner:ci
  "$@"
fi
