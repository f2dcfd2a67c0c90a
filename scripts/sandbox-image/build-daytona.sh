#!/usr/bin/env bash
# Rebuilds the Daytona snapshot from images/daytona/Dockerfile in the organisation Fountain uses in
# production, then runs smoke.sh in a new sandbox of it. Needs DAYTONA_API_KEY and the daytona CLI.
# Not run on the development machines (no Docker engine, no Daytona account there).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${DAYTONA_API_KEY:?set DAYTONA_API_KEY to the key of the organisation Fountain uses}"
export DAYTONA_SNAPSHOT="${DAYTONA_SNAPSHOT:-fountain}" SMOKE_EXPECT_USER=sprite

docker_smoke daytona
# Snapshots are immutable: the old one goes first (it may not exist yet).
daytona snapshot delete "$DAYTONA_SNAPSHOT" >/dev/null 2>&1 || true
daytona snapshot create "$DAYTONA_SNAPSHOT" --dockerfile "$ROOT/images/daytona/Dockerfile" --cpu 2 --memory 4 --disk 10
provider_smoke daytona
