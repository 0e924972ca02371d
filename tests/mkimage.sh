#!/bin/sh
# Build the test image from Debian's busybox-static: a root filesystem with busybox's applets as
# symlinks, a passwd with root and `user` (1000), and the isolation probe at /usr/bin/warren-probe.
# Usage: tests/mkimage.sh OUTDIR PROBE
set -eu
out=$1
probe=$(realpath "$2")
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "mkimage: $busybox missing (apt-get install busybox-static)" >&2; exit 1; }
ldd "$busybox" 2>&1 | grep -q "not a dynamic" \
    || { echo "mkimage: $busybox is not static (install busybox-static)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
cd "$out"
mkdir -p bin sbin usr/bin usr/sbin proc dev sys tmp etc root run var/tmp home/user
cp "$busybox" bin/busybox
for applet in $(bin/busybox --list-full); do
    [ -e "$applet" ] || ln -s /bin/busybox "$applet"
done
cp "$probe" usr/bin/warren-probe
chmod 0755 usr/bin/warren-probe
printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > etc/passwd
printf 'root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n' > etc/group
echo 'image motd' > etc/motd
chown 1000:1000 home/user
chmod 1777 tmp var/tmp
