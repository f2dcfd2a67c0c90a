#!/usr/bin/env bash
# Builds what the microVM backend boots, into a cache directory (never committed):
#   vmlinux       the Debian kernel (linux-image-amd64's current dependency), uncompressed, PVH entry
#   initrd.cpio   busybox-static + the virtio/ext4/vsock modules; mounts /dev/vda and switch_roots
#   rootfs.ext4   ext4 made with `mke2fs -d` (no loop mounts, no root-only mounts): busybox, bash,
#                 git, node, npm/npx, the fountain bundle, and an init that starts `fountain runner-guest`
# Needs: apt-get (download only), dpkg-deb, python3, cpio, mke2fs, busybox (busybox-static), socat.
# bash, git and node come from this machine's Debian packages (with the libraries ldd lists).
# Usage: scripts/microvm/build-guest-image.sh [out-dir]   (default .cache/microvm)
#        FOUNTAIN_IMAGE_SIZE=1536M to change the rootfs size.
# Idempotent: each part is rebuilt only when what it is made from changed (kernel.stamp: this script's
# kernel section; rootfs.stamp: the rest of this script, the fountain bundle, the copied tools'
# versions), so CI calls it on every run. The bundle is started on this machine first: a bundle
# whose `runner-guest` does not answer a ping fails the build, not a boot two minutes later.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mkdir -p "${1:-$REPO/.cache/microvm}" && cd "${1:-$REPO/.cache/microvm}" && pwd)
SIZE=${FOUNTAIN_IMAGE_SIZE:-1536M}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
say() { echo "build-guest-image: $*" >&2; }

for tool in dpkg-deb python3 cpio mke2fs busybox socat node; do
  command -v "$tool" >/dev/null || { say "missing $tool (see .ci/run for the packages)"; exit 1; }
done
BUSYBOX=$(command -v busybox)

stamp() { sha256sum | cut -d' ' -f1; }
SELF=$(readlink -f "$0")
KERNEL_STAMP=$(sed -n '/^# 1\. /,/^# 2\. /p' "$SELF" | stamp)

# 1. Kernel and modules, from the Debian package linux-image-amd64 depends on today.
if [ ! -s "$OUT/vmlinux" ] || [ ! -s "$OUT/initrd.cpio" ] || [ "$(cat "$OUT/kernel.stamp" 2>/dev/null)" != "$KERNEL_STAMP" ]; then
  PKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$PKG" ] || { say "apt-cache does not know linux-image-amd64: run apt-get update"; exit 1; }
  say "kernel package $PKG"
  (cd "$WORK" && apt-get download "$PKG" >/dev/null)
  dpkg-deb -x "$WORK"/"$PKG"_*.deb "$WORK/kpkg"
  VMLINUZ=$(ls "$WORK"/kpkg/boot/vmlinuz-*)
  KVER=${VMLINUZ##*/vmlinuz-}
  # The bzImage's XZ payload is the ELF vmlinux with a PVH entry: QEMU and Firecracker boot it directly.
  python3 - "$VMLINUZ" "$WORK/vmlinux" <<'PY'
import lzma, sys
b = open(sys.argv[1], "rb").read()
i = b.find(b"\xfd7zXZ\x00")
if i < 0: sys.exit("no XZ payload in the kernel image")
open(sys.argv[2], "wb").write(lzma.LZMADecompressor().decompress(b[i:]))
PY
  # Initramfs: load modules in dependency order, mount the ext4 disk, hand over to its init.
  INI="$WORK/initramfs"
  mkdir -p "$INI"/{bin,dev,proc,sys,newroot,lib/modules}
  cp "$BUSYBOX" "$INI/bin/busybox"
  MODS="virtio_ring virtio virtio_mmio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk virtio_console crc32c_generic crc16 mbcache jbd2 ext4 failover net_failover virtio_net vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport"
  : > "$INI/modules.order"
  for m in $MODS; do
    f=$(find "$WORK/kpkg/lib/modules/$KVER" -name "$m.ko" | head -1)
    if [ -n "$f" ]; then cp "$f" "$INI/lib/modules/$m.ko"; echo "$m" >> "$INI/modules.order"; fi
  done
  cat > "$INI/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod /lib/modules/$m.ko 2>/dev/null; done
i=0; while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
if ! mount -t ext4 -o rw /dev/vda /newroot; then echo "initramfs: cannot mount /dev/vda as ext4"; sleep 1; reboot -f; fi
umount /proc /sys; umount /dev
exec switch_root /newroot /sbin/init
INIT
  chmod 755 "$INI/init"
  (cd "$INI" && find . | cpio -o -H newc --quiet) > "$WORK/initrd.cpio"
  mv "$WORK/vmlinux" "$OUT/vmlinux"
  mv "$WORK/initrd.cpio" "$OUT/initrd.cpio"
  echo "$KERNEL_STAMP" > "$OUT/kernel.stamp"
  say "vmlinux and initrd.cpio for $KVER"
else
  say "vmlinux and initrd.cpio are up to date"
fi

# 2. Root filesystem.
# The fountain bundle: one ESM file, laid out so its ../../package.json is found.
B="$WORK/bundle"
mkdir -p "$B/src/cli"
"$REPO/node_modules/esbuild/bin/esbuild" "$REPO/src/cli/main.ts" --bundle --platform=node --format=esm --target=node20 --log-level=warning \
  --outfile="$B/src/cli/main.mjs" \
  --banner:js="import { createRequire as __fountainRequire } from 'node:module'; const require = __fountainRequire(import.meta.url);"
cp "$REPO/package.json" "$B/package.json"
# Smoke test: the agent as init starts it, on a unix socket here instead of the guest's port.
mkdir -p "$WORK/smoke/home"
node "$B/src/cli/main.mjs" runner-guest --root "$WORK/smoke/home" --listen "$WORK/smoke/agent.sock" --log-level warn 2>"$WORK/smoke/log" &
SMOKE_PID=$!
for _ in $(seq 100); do [ -S "$WORK/smoke/agent.sock" ] || ! kill -0 $SMOKE_PID 2>/dev/null && break; sleep 0.1; done
PONG=$(echo '{"id":1,"op":"ping"}' | timeout 10 socat -t5 - "UNIX-CONNECT:$WORK/smoke/agent.sock" 2>/dev/null || true)
kill $SMOKE_PID 2>/dev/null || true
wait $SMOKE_PID 2>/dev/null || true
case "$PONG" in
  *'"ok":true'*) ;;
  *) say "the bundle's \`fountain runner-guest\` did not answer a ping on this machine:"; cat "$WORK/smoke/log" >&2; exit 1 ;;
esac

ROOTFS_STAMP=$( (sed -n '/^# 2\. /,$p' "$SELF"; cat "$B/src/cli/main.mjs" "$B/package.json"; node --version; bash --version | head -1; git --version; socat -V 2>/dev/null | grep -m1 version; "$BUSYBOX" | head -1; echo "$SIZE") | stamp)
if [ -s "$OUT/rootfs.ext4" ] && [ "$(cat "$OUT/rootfs.stamp" 2>/dev/null)" = "$ROOTFS_STAMP" ]; then
  say "rootfs.ext4 is up to date in $OUT"
  exit 0
fi
R="$WORK/rootfs"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,usr/lib,usr/local/bin,lib64,etc,home,root,tmp,proc,sys,dev,run,var/tmp,opt/fountain}
chmod 1777 "$R/tmp" "$R/var/tmp"
cp "$BUSYBOX" "$R/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ -e "$R/bin/$applet" ] || ln -s busybox "$R/bin/$applet"
done
# Copies a binary and every library ldd names, at the same paths.
copy_with_libs() {
  local src=$1 dst=${2:-$1}
  mkdir -p "$R$(dirname "$dst")"
  cp -L "$src" "$R$dst"
  ldd "$src" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    [ -e "$R$lib" ] || { mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"; }
  done
}
rm -f "$R/bin/sh" "$R/bin/bash"
copy_with_libs "$(readlink -f "$(command -v bash)")" /bin/bash
ln -sf bash "$R/bin/sh"
copy_with_libs "$(readlink -f "$(command -v git)")" /usr/bin/git
if [ -d /usr/lib/git-core ]; then
  # Most helpers are hard links to git itself: cp -a keeps them links, not 150 copies.
  cp -a /usr/lib/git-core "$R/usr/lib/"
  for helper in git-remote-http git-remote-https; do
    [ -e "/usr/lib/git-core/$helper" ] && copy_with_libs "/usr/lib/git-core/$helper"
  done
  [ -d /usr/share/git-core ] && { mkdir -p "$R/usr/share"; cp -a /usr/share/git-core "$R/usr/share/"; }
fi
NODE=$(readlink -f "$(command -v node)")
copy_with_libs "$NODE" /usr/bin/node
NPM_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
mkdir -p "$R/usr/lib/node_modules"
cp -a "$NPM_DIR" "$R/usr/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/bin/npx"
copy_with_libs "$(command -v socat)" /usr/bin/socat
# GNU tar, find and realpath over busybox's: a checkpoint of the sandbox's HOME uses their options
# (tar --exclude-from and --warning, find -lname, realpath --relative-to), which busybox lacks.
for tool in tar find realpath; do
  rm -f "$R/bin/$tool"
  copy_with_libs "$(readlink -f "$(command -v "$tool")")" "/bin/$tool"
done
# Name resolution and TLS roots, so git and npm work once the bridge routes somewhere.
for f in /etc/nsswitch.conf /etc/ssl/certs/ca-certificates.crt; do [ -e "$f" ] && { mkdir -p "$R$(dirname "$f")"; cp -L "$f" "$R$f"; }; done
for lib in /lib/x86_64-linux-gnu/libnss_dns.so.2 /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libresolv.so.2; do
  [ -e "$lib" ] && { mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"; }
done
printf 'root:x:0:0:root:/root:/bin/bash\nsprite:x:1000:1000::/home/sprite:/bin/bash\n' > "$R/etc/passwd"
printf 'root:x:0:\nsprite:x:1000:\n' > "$R/etc/group"
printf '127.0.0.1 localhost sprite\n' > "$R/etc/hosts"
echo sprite > "$R/etc/hostname"

cp -a "$B/." "$R/opt/fountain/"
printf '#!/bin/sh\nexec /usr/bin/node /opt/fountain/src/cli/main.mjs "$@"\n' > "$R/usr/local/bin/fountain"
chmod 755 "$R/usr/local/bin/fountain"

# PID 1: mount the basics, name the virtio-serial ports (no udev), then keep the agent running.
rm -f "$R/sbin/init"
cat > "$R/sbin/init" <<'INIT'
#!/bin/busybox sh
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root FOUNTAIN_LOG_FORMAT=json
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /dev/shm
hostname sprite; ip link set lo up 2>/dev/null
mkdir -p /dev/virtio-ports
for p in /sys/class/virtio-ports/*; do [ -e "$p/name" ] && ln -sf "/dev/${p##*/}" "/dev/virtio-ports/$(cat "$p/name")"; done
if grep -q 'fountain.link=serial' /proc/cmdline; then LINK="--serial /dev/virtio-ports/fountain"; else LINK=""; fi
# The agent's log goes to /run/runner-guest.log and to the serial console, which the host keeps
# (QEMU: console.log, Firecracker: its log): a guest whose agent never answers says why there.
while true; do
  /usr/local/bin/fountain runner-guest $LINK 2>&1 | tee -a /run/runner-guest.log >/dev/console
  echo "init: fountain runner-guest exited; starting it again" >/dev/console
  sleep 1
done
INIT
chmod 755 "$R/sbin/init"

rm -f "$OUT/rootfs.ext4.partial"
mke2fs -q -t ext4 -L fountain -d "$R" -F "$OUT/rootfs.ext4.partial" "$SIZE"
mv "$OUT/rootfs.ext4.partial" "$OUT/rootfs.ext4"
echo "$ROOTFS_STAMP" > "$OUT/rootfs.stamp"
say "rootfs.ext4 ($SIZE, $(du -sh "$R" | cut -f1) used) in $OUT"
