# Shared by the build-<provider>.sh scripts: the docker-side proof of an image, and the smoke in
# a new sandbox of the provider itself. Source it; do not run it.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SMOKE="$ROOT/scripts/sandbox-image/smoke.sh"

# docker_smoke <provider> [docker build flags...]: builds images/<provider>/Dockerfile (with the flags,
# e.g. --build-arg BASE_IMAGE=...) and runs smoke.sh in it as sprite; fails unless the smoke passes.
# DOCKER_NETWORK names the network of the build and the run (CI's engine has no bridge: host there).
# Skipped (with a note) where no Docker engine answers.
docker_smoke() {
  local provider="$1" tag="fountain-sandbox-$1:smoke" net="${DOCKER_NETWORK:-default}"
  shift
  if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    echo "note: no Docker engine; skipping the local build of images/$provider" >&2
    return 0
  fi
  # Explicit: set -e does not act inside a function its caller tests (`docker_smoke x || ...`), and a
  # failed build must not let the smoke run on an older image of the same tag.
  docker build --network "$net" "$@" -t "$tag" "$ROOT/images/$provider" || return 1
  local out
  out="$(docker run --rm --network "$net" --user sprite -e SMOKE_EXPECT_USER=sprite "$tag" \
    bash -c "printf %s '$(base64 -w0 "$SMOKE")' | base64 -d > /tmp/smoke.sh && bash /tmp/smoke.sh")" || true
  printf '%s\n' "$out"
  grep -qx FOUNTAIN_IMAGE_SMOKE_OK <<<"$out"
}

# provider_smoke <provider>: smoke.sh in a new sandbox of the provider, through Fountain's adapter.
provider_smoke() {
  (cd "$ROOT" && npx tsx scripts/sandbox-image/smoke-in.ts "$1")
}
