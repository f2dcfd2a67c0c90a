#!/usr/bin/env bash
# Sprites boots its own base image; images/sprites/Dockerfile states (and docker_smoke proves) what
# Fountain needs from it. This builds that image where Docker runs, then smokes a new sprite.
# Needs SPRITES_TOKEN. Not run on the development machines (no Docker engine, no Sprites account).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${SPRITES_TOKEN:?set SPRITES_TOKEN to the token of the account Fountain uses}"
export SMOKE_EXPECT_USER=sprite

docker_smoke sprites
provider_smoke sprites
