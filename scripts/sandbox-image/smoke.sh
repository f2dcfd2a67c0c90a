#!/usr/bin/env bash
# What a sandbox image must give Fountain's provision pipeline, checked from inside a sandbox:
# identity, tooling, a global npm install as the exec user, the agent CLIs and the ACP adapters.
# Prints one `ok` or `FAIL` line per check, then the verdict line
#   FOUNTAIN_IMAGE_SMOKE_OK                      (exit 0), or
#   FOUNTAIN_IMAGE_SMOKE_FAILED <n> (<names>)    (exit 1)
# The marker is what callers read: some provider exec APIs swallow exit codes.
# Offline-safe: the global install uses a package this script packs itself, never the registry.
# Env: SMOKE_EXPECT_USER (the user commands must run as), SMOKE_TIMEOUT (seconds per check, 180).
set -u

SMOKE_TIMEOUT="${SMOKE_TIMEOUT:-180}"
failed=()

ok() { printf 'ok %s: %s\n' "$1" "$2"; }
fail() { printf 'FAIL %s: %s\n' "$1" "$2"; failed+=("$1"); }

# Runs a command under the per-check timeout when coreutils' timeout exists; prints its first line.
run() {
  if command -v timeout >/dev/null 2>&1; then timeout "$SMOKE_TIMEOUT" "$@" 2>&1; else "$@" 2>&1; fi
}

# version <check name> <command...>: the command must exist and answer --version with status 0.
version() {
  local name="$1"; shift
  if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "$1" ]; then fail "$name" "$1 not found on PATH"; return; fi
  local out status
  out="$(run "$@" --version </dev/null)"; status=$?
  if [ "$status" -eq 0 ]; then ok "$name" "$(printf '%s' "$out" | head -n 1)"
  elif [ "$status" -eq 124 ]; then fail "$name" "$1 --version timed out after ${SMOKE_TIMEOUT}s"
  else fail "$name" "$1 --version exited $status: $(printf '%s' "$out" | head -n 1)"; fi
}

# --- 1. identity
user="$(id -un 2>/dev/null || echo "uid-$(id -u)")"
echo "user=$user home=${HOME:-} pwd=$(pwd)"
if [ -n "${SMOKE_EXPECT_USER:-}" ] && [ "$user" != "$SMOKE_EXPECT_USER" ]; then
  fail identity "runs as $user, expected $SMOKE_EXPECT_USER"
else
  ok identity "$user"
fi
if [ -z "${HOME:-}" ] || [ ! -d "$HOME" ]; then
  fail home "HOME (${HOME:-unset}) is not a directory"
elif probe="$HOME/.fountain-smoke-$$" && : >"$probe" 2>/dev/null && rm -f "$probe"; then
  ok home "$HOME is writable"
else
  fail home "$HOME is not writable"
fi

# --- 2. tooling
version bash bash
version git git
version node node
version npm npm

# --- 3. a global npm install as the exec user
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  prefix="$(npm config get prefix 2>/dev/null)"
  echo "npm prefix=$prefix"
  work="$(mktemp -d "${TMPDIR:-/tmp}/fountain-smoke.XXXXXX")"
  pkg="fountain-smoke-probe"
  mkdir -p "$work/pkg"
  printf '{"name":"%s","version":"1.0.0","bin":{"%s":"cli.js"},"license":"MIT"}\n' "$pkg" "$pkg" >"$work/pkg/package.json"
  printf '#!/usr/bin/env node\nconsole.log("%s works");\n' "$pkg" >"$work/pkg/cli.js"
  tarball="$(cd "$work" && npm pack ./pkg --silent 2>/dev/null | tail -n 1)"
  if [ -z "$tarball" ] || [ ! -f "$work/$tarball" ]; then
    fail npm-global "npm pack could not build the probe package"
  else
    out="$(run npm install -g --no-progress --silent --no-audit --no-fund --offline "$work/$tarball")"; status=$?
    if [ "$status" -ne 0 ]; then
      hint=""
      [ "$status" -eq 243 ] && hint=" (243: the prefix is not writable by $user; set npm config prefix to a directory it owns)"
      fail npm-global "npm install -g exited $status$hint: $(printf '%s' "$out" | head -n 1)"
    elif [ ! -x "$prefix/bin/$pkg" ]; then
      fail npm-global "$prefix/bin/$pkg is not executable after the install"
    elif [ "$("$prefix/bin/$pkg" 2>&1)" != "$pkg works" ]; then
      fail npm-global "$prefix/bin/$pkg did not run"
    else
      ok npm-global "installed $pkg into $prefix as $user"
      case ":$PATH:" in
        *":$prefix/bin:"*) ;;
        *) echo "note: $prefix/bin is not on PATH (provision links adapters into ~/.local/bin)" ;;
      esac
    fi
    run npm uninstall -g --silent "$pkg" >/dev/null
  fi
  rm -rf "$work"
else
  fail npm-global "node and npm are needed for the global install"
fi

# --- 4. agent CLIs (bun and opencode live under ~/.bun/bin in the images)
bun_bin="$(command -v bun 2>/dev/null || echo "$HOME/.bun/bin/bun")"
opencode_bin="$(command -v opencode 2>/dev/null || echo "$HOME/.bun/bin/opencode")"
version claude claude
version codex codex
version gemini gemini
version bun "$bun_bin"
version opencode "$opencode_bin"

# --- 5. the ACP adapters' commands (gemini --acp and opencode acp are the CLIs above)
version claude-agent-acp claude-agent-acp
version codex-acp codex-acp

if [ "${#failed[@]}" -eq 0 ]; then
  echo FOUNTAIN_IMAGE_SMOKE_OK
  exit 0
fi
echo "FOUNTAIN_IMAGE_SMOKE_FAILED ${#failed[@]} (${failed[*]})"
exit 1
