#!/usr/bin/env bash
# Rebuilds the E2B template from images/e2b/Dockerfile with the account Fountain uses in production,
# then runs smoke.sh in a new sandbox of it. Needs E2B_API_KEY (and the CLI's E2B_ACCESS_TOKEN).
# Not run on the development machines (no Docker engine, no E2B account there).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${E2B_API_KEY:?set E2B_API_KEY to the key of the account Fountain uses}"
export E2B_TEMPLATE="${E2B_TEMPLATE:-fountain}" E2B_USER=sprite SMOKE_EXPECT_USER=sprite

docker_smoke e2b
npx --yes @e2b/cli@2.17.1 template create "$E2B_TEMPLATE" \
  --path "$ROOT/images/e2b" --dockerfile Dockerfile --cpu-count 2 --memory-mb 2048
provider_smoke e2b
