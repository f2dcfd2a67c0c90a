#!/bin/sh
# Installs a Fountain runner from the Fountain server that served this script (its address is written
# in below as it is served; --url overrides it). Needs Node.js 20 or newer and curl or wget.
#
#   curl -fsSL <server>/runner/install.sh | sh -s -- --token ftr_… [--name N] [--backend B] [--root DIR] [--service]
#
# It downloads the runner from that server, checks its sha256, enrolls this machine with the single-use
# token, installs it under ~/.fountain/runner/<version>/ with a `fountain-runner` launcher, and starts it
# (in the foreground, or as a systemd service with --service). Running it again upgrades in place.
set -eu

# Everything runs from main, called on the last line: a shell reading this from a pipe has the whole
# script before it acts, so a cut-off download does nothing and an early exit leaves curl nothing to complain about.
main() {

FOUNTAIN_URL='@FOUNTAIN_URL@'
TOKEN=''
NAME=''
BACKEND=''
ROOT_DIR=''
BIN_DIR=''
SERVICE=0
AUTO_UPDATE=0
TMP=''

say() { printf 'fountain: %s\n' "$*" >&2; }
die() {
  printf 'fountain: %s\n' "$*" >&2
  exit 1
}
cleanup() { if [ -n "$TMP" ]; then rm -rf "$TMP"; fi; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

usage() {
  cat <<'EOF'
Installs and starts a Fountain runner on this machine.

  --token ftr_…      the registration token from "Add runner" (required)
  --name NAME        the runner's name (default: this machine's hostname)
  --backend B        process (default), namespace or firecracker
  --root DIR         where sandboxes live (default: ~/.fountain/runners/<name>/sandboxes)
  --service          install a systemd service (system-wide as root, --user otherwise) instead of
                     starting in the foreground
  --auto-update      let the runner install the server's version when it changes
  --url URL          the Fountain server (default: the one this script came from)
  --bin-dir DIR      where the fountain-runner launcher goes (default: ~/.local/bin, /usr/local/bin as root)
EOF
}

need_value() { [ "$2" -ge 2 ] || die "$1 needs a value (see --help)."; }
while [ $# -gt 0 ]; do
  case "$1" in
    --token) need_value "$1" $#; TOKEN=$2; shift 2 ;;
    --token=*) TOKEN=${1#*=}; shift ;;
    --url) need_value "$1" $#; FOUNTAIN_URL=$2; shift 2 ;;
    --url=*) FOUNTAIN_URL=${1#*=}; shift ;;
    --name) need_value "$1" $#; NAME=$2; shift 2 ;;
    --name=*) NAME=${1#*=}; shift ;;
    --backend) need_value "$1" $#; BACKEND=$2; shift 2 ;;
    --backend=*) BACKEND=${1#*=}; shift ;;
    --root) need_value "$1" $#; ROOT_DIR=$2; shift 2 ;;
    --root=*) ROOT_DIR=${1#*=}; shift ;;
    --bin-dir) need_value "$1" $#; BIN_DIR=$2; shift 2 ;;
    --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
    --service) SERVICE=1; shift ;;
    --auto-update) AUTO_UPDATE=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)." ;;
  esac
done

# Inputs, checked before anything is written.
FOUNTAIN_URL=${FOUNTAIN_URL%/}
case "$FOUNTAIN_URL" in
  http://?* | https://?*) ;;
  *) die "--url must be the http(s) address of the Fountain server, not \"$FOUNTAIN_URL\"." ;;
esac
[ -n "$TOKEN" ] || die "--token is required: copy the whole command from \"Add runner\" on the Runners page."
case "$TOKEN" in
  ftr_*[!0-9a-f]*) die "--token must be the ftr_… token \"Add runner\" shows; this one is malformed." ;;
  ftr_*) [ ${#TOKEN} -eq 52 ] || die "--token must be the ftr_… token \"Add runner\" shows; this one is malformed." ;;
  *) die "--token must be the ftr_… token \"Add runner\" shows; this one is malformed." ;;
esac
case "$NAME" in
  '') ;;
  *[!a-z0-9._-]* | [._-]*) die "--name must be 1-63 of a-z 0-9 . _ - and start with a letter or digit." ;;
esac
[ ${#NAME} -le 63 ] || die "--name must be at most 63 characters."
case "$BACKEND" in
  '' | process | namespace | firecracker) ;;
  *) die "--backend must be process, namespace or firecracker." ;;
esac
case "$ROOT_DIR" in
  *\'* | *\"* | *%* | *\\*) die "--root must not contain quotes, backslashes or %." ;;
esac

# Node.js: the runner's only prerequisite.
NODE=$(command -v node 2>/dev/null || true)
NODE_HINT="install Node.js 20 LTS or newer (https://nodejs.org/en/download; on Debian or Ubuntu: the NodeSource nodejs package), then run this command again."
[ -n "$NODE" ] || die "Node.js is not installed (no node on PATH): $NODE_HINT"
NODE_VERSION=$("$NODE" -p 'process.versions.node' 2>/dev/null || echo unknown)
case "$NODE_VERSION" in
  [2-9][0-9].* | [1-9][0-9][0-9]*.*) ;;
  *) die "Node.js $NODE_VERSION is too old for the Fountain runner: $NODE_HINT" ;;
esac

# What the chosen backend needs on this machine, named as packages.
missing=''
have() { command -v "$1" >/dev/null 2>&1; }
want() { have "$1" || case " $missing " in *" $2 "*) ;; *) missing="$missing $2" ;; esac; }
case "$BACKEND" in
  namespace)
    [ "$(id -u)" -eq 0 ] || die "the namespace backend runs as root: run this command as root (sudo sh -s -- …)."
    want bwrap bubblewrap
    want nsenter util-linux
    want setpriv util-linux
    want ip iproute2
    want nft nftables
    ;;
  firecracker)
    want ip iproute2
    if ! { have firecracker && [ -c /dev/kvm ]; } && ! have "qemu-system-$(uname -m)"; then
      case "$(uname -m)" in x86_64) missing="$missing qemu-system-x86" ;; aarch64) missing="$missing qemu-system-arm" ;; *) missing="$missing qemu-system" ;; esac
    fi
    ;;
esac
[ -z "$missing" ] || die "the $BACKEND backend needs packages this machine lacks:$missing (Debian/Ubuntu: apt-get install$missing)."

# Where it goes.
FHOME=${FOUNTAIN_HOME:-$HOME/.fountain}
DIR=$FHOME/runner
if [ -z "$BIN_DIR" ]; then
  if [ "$(id -u)" -eq 0 ]; then BIN_DIR=/usr/local/bin; else BIN_DIR=$HOME/.local/bin; fi
fi
for d in "$FHOME" "$BIN_DIR"; do
  case "$d" in *\'* | *\"* | *%* | *\\*) die "$d: the install path must not contain quotes, backslashes or %." ;; esac
done
mkdir -p "$DIR" 2>/dev/null && TMP=$(mktemp -d "$DIR/.install-XXXXXX" 2>/dev/null) ||
  die "cannot write to $DIR: make it writable or set HOME (or FOUNTAIN_HOME) to a writable directory."
mkdir -p "$BIN_DIR" 2>/dev/null && [ -w "$BIN_DIR" ] || die "cannot write to $BIN_DIR: choose another with --bin-dir."
if [ "$SERVICE" -eq 1 ]; then
  if [ -n "${FOUNTAIN_SYSTEMD_UNIT_DIR:-}" ]; then UNIT_DIR=$FOUNTAIN_SYSTEMD_UNIT_DIR
  elif [ "$(id -u)" -eq 0 ]; then UNIT_DIR=/etc/systemd/system
  else UNIT_DIR=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user; fi
  mkdir -p "$UNIT_DIR" 2>/dev/null && [ -w "$UNIT_DIR" ] || die "cannot write the systemd unit to $UNIT_DIR."
fi

# Download from the server, then verify.
fetch() {
  if have curl; then
    curl -fsS --connect-timeout 15 -o "$2" "$1" 2>/dev/null || case $? in 22) return 22 ;; *) return 1 ;; esac
  elif have wget; then
    wget -q -T 15 -O "$2" "$1" 2>/dev/null || case $? in 8) return 22 ;; *) return 1 ;; esac
  else
    die "neither curl nor wget is installed: install curl (apt-get install curl), then run this command again."
  fi
}
rc=0
fetch "$FOUNTAIN_URL/runner/manifest.json" "$TMP/manifest.json" || rc=$?
[ "$rc" -ne 22 ] || die "$FOUNTAIN_URL answered with an error for its runner manifest: is it a Fountain server, with runners enabled?"
[ "$rc" -eq 0 ] || die "cannot reach the Fountain server at $FOUNTAIN_URL: check the address and that this machine can reach it."
MANIFEST=$("$NODE" -e '
  const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (!/^[0-9A-Za-z.+-]{1,80}$/.test(m.version) || !/^[0-9a-f]{64}$/.test(m.sha256)) process.exit(1);
  process.stdout.write(m.version + " " + m.sha256);
' "$TMP/manifest.json" 2>/dev/null) || die "$FOUNTAIN_URL did not answer with a runner manifest: is it a Fountain server?"
VERSION=${MANIFEST% *}
SHA256=${MANIFEST#* }
fetch "$FOUNTAIN_URL/runner/artifact" "$TMP/fountain-runner.mjs" ||
  die "cannot download the runner from $FOUNTAIN_URL/runner/artifact: check that this machine can reach the server."
if have sha256sum; then GOT=$(sha256sum "$TMP/fountain-runner.mjs")
elif have shasum; then GOT=$(shasum -a 256 "$TMP/fountain-runner.mjs")
else GOT=$("$NODE" -e 'process.stdout.write(require("crypto").createHash("sha256").update(require("fs").readFileSync(process.argv[1])).digest("hex"))' "$TMP/fountain-runner.mjs"); fi
GOT=${GOT%% *}
[ "$GOT" = "$SHA256" ] ||
  die "the downloaded runner does not match the checksum the server published (expected $SHA256, got $GOT); nothing was installed."

# Enroll with the token (from the downloaded copy, so a refused token leaves nothing installed).
set -- --url "$FOUNTAIN_URL"
[ -z "$NAME" ] || set -- "$@" --name "$NAME"
NAME=$(FOUNTAIN_HOME=$FHOME "$NODE" "$TMP/fountain-runner.mjs" --enroll-only --token "$TOKEN" "$@") || exit 1

# Install: the version directory, then `current`, then the launcher, each by a rename.
if [ ! -f "$DIR/$VERSION/fountain-runner.mjs" ]; then
  mkdir "$TMP/version"
  chmod 755 "$TMP/fountain-runner.mjs" "$TMP/version"
  mv "$TMP/fountain-runner.mjs" "$TMP/version/fountain-runner.mjs"
  rm -rf "${DIR:?}/$VERSION"
  mv "$TMP/version" "$DIR/$VERSION"
fi
ln -s "$VERSION" "$TMP/current"
"$NODE" -e 'require("fs").renameSync(process.argv[1], process.argv[2])' "$TMP/current" "$DIR/current"
cat >"$TMP/launcher" <<EOF
#!/bin/sh
# fountain-runner: starts the installed Fountain runner ($DIR/current), written by the server's install.sh.
# The runner exits 75 once it has moved to a newly installed version and no session runs: start it again.
FOUNTAIN_HOME=\${FOUNTAIN_HOME:-'$FHOME'}
export FOUNTAIN_HOME
while :; do
  rc=0
  '$NODE' "\$FOUNTAIN_HOME/runner/current/fountain-runner.mjs" "\$@" || rc=\$?
  [ "\$rc" -eq 75 ] || exit "\$rc"
done
EOF
chmod 755 "$TMP/launcher"
mv -f "$TMP/launcher" "$BIN_DIR/fountain-runner"
say "installed fountain-runner $VERSION in $DIR/$VERSION, launcher $BIN_DIR/fountain-runner"
case ":$PATH:" in
  *":$BIN_DIR:"*) ;;
  *) say "$BIN_DIR is not on your PATH: add it (export PATH=\"$BIN_DIR:\$PATH\") or run $BIN_DIR/fountain-runner" ;;
esac

set -- --name "$NAME"
[ -z "$BACKEND" ] || set -- "$@" --backend "$BACKEND"
[ -z "$ROOT_DIR" ] || set -- "$@" --root "$ROOT_DIR"
[ "$AUTO_UPDATE" -eq 0 ] || set -- "$@" --auto-update

if [ "$SERVICE" -eq 0 ]; then
  say "runner $NAME starting in the foreground (Ctrl-C stops it; \`fountain-runner --name $NAME\` starts it again)"
  cleanup
  trap - EXIT INT TERM
  exec "$BIN_DIR/fountain-runner" "$@"
fi

# A systemd service.
UNIT=fountain-runner-$NAME.service
if [ "$(id -u)" -eq 0 ]; then
  SCOPE=''
  WANTED_BY=multi-user.target
else
  SCOPE='--user'
  WANTED_BY=default.target
fi
EXEC="$BIN_DIR/fountain-runner"
for a in "$@"; do EXEC="$EXEC \"$a\""; done
cat >"$TMP/unit" <<EOF
[Unit]
Description=Fountain runner $NAME (serves sandboxes to $FOUNTAIN_URL)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
Environment="FOUNTAIN_HOME=$FHOME"
ExecStart=$EXEC --log-format json
Restart=always
RestartSec=2

[Install]
WantedBy=$WANTED_BY
EOF
mv -f "$TMP/unit" "$UNIT_DIR/$UNIT"
say "wrote $UNIT_DIR/$UNIT:"
cat "$UNIT_DIR/$UNIT" >&2
if [ -d /run/systemd/system ] && have systemctl; then
  systemctl $SCOPE daemon-reload
  systemctl $SCOPE enable --now "$UNIT"
  say "enabled and started $UNIT (a running runner moves to this version once no session runs)"
  [ -z "$SCOPE" ] || say "to keep it running while you are logged out: loginctl enable-linger $(id -un)"
else
  say "systemd is not running on this machine, so the unit was written but not started: start the runner with $BIN_DIR/fountain-runner --name $NAME"
fi
say "logs: journalctl $SCOPE -u $UNIT -f"
}

main "$@"
