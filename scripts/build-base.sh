#!/bin/sh
# Build Warren's `base` template: Debian bookworm (minbase) with bash, coreutils, python3, nodejs,
# git, curl, ca-certificates, procps, sudo, libnss-myhostname (so the sandbox's hostname, its
# id, resolves) and openssh-server (not started at boot and without host keys: `warren ssh`
# makes them and starts sshd on demand), and a user `user` (uid 1000, /home/user, bash, passwordless sudo). Needs root and
# the Debian archive; takes about a minute (the .deb cache saves the downloads on rebuilds).
#
# Usage: scripts/build-base.sh OUTDIR [PROFILE]
#   writes OUTDIR/rootfs (built in OUTDIR/rootfs.tmp, then renamed: a failed or interrupted build
#   leaves the previous rootfs, or nothing) and OUTDIR/config.json.
#   PROFILE (default: base) names scripts/templates/PROFILE.sh, a template built on the base
#   (code-interpreter-v1, desktop): see the top of scripts/templates/README for what it sets;
#   or it is the path of such a file (the tests' own: tests/templates/).
# Environment:
#   WARREN_DEBIAN_MIRROR    archive to build from (default: the machine's apt mirror, the first
#                           `URIs:` in /etc/apt/sources.list.d/debian.sources); it also goes into
#                           the template's /etc/apt/sources.list
#   WARREN_DEBIAN_SECURITY  security archive (default: the machine's; `none` leaves it out)
#   WARREN_DEBCACHE         .deb and package-list cache kept between builds
#                           (default: OUTDIR/../.debcache; `none` disables it)
# The build log is OUTDIR/build.log. See docs/templates.md.
set -eu

SUITE=bookworm
PACKAGES=bash,coreutils,python3,nodejs,git,curl,ca-certificates,procps,sudo,libnss-myhostname,openssh-server
PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# A profile adds to the base: PROFILE_PACKAGES, profile_customize, PROFILE_CHECKS, profile_config.
WB_SRC=$(cd "$(dirname "$0")/.." && pwd)
export WB_SRC
PROFILE_PACKAGES=
PROFILE_CHECKS=
profile_customize() { :; }
profile_config() {
    printf '{"user": "user", "cwd": "/home/user", "setuid": true, "env": {"PATH": "%s", "LANG": "C.UTF-8"}}\n' "$PATH_ENV"
}
load_profile() { # NAME, or the path of a profile file (a test's: tests/templates/)
    [ "$1" = base ] && return 0
    case $1 in
    */*) f=$1 ;;
    *) f=$WB_SRC/scripts/templates/$1.sh ;;
    esac
    [ -r "$f" ] || { echo "build-base: no profile $1 ($f)" >&2; exit 2; }
    # shellcheck disable=SC1090
    . "$f"
}

# ---- hooks: mmdebstrap runs this script again inside the build, with the rootfs in $3 ---------

copy_tree_files() { # SRC DST: hard-link (or copy) the regular files of SRC into DST
    for f in "$1"/*; do
        [ -f "$f" ] || continue
        ln -f "$f" "$2/" 2>/dev/null || cp -p "$f" "$2/"
    done
}

hook_setup() {
    r=$1
    # dpkg need not fsync every file of a tree that is thrown away if the build fails.
    mkdir -p "$r/etc/dpkg/dpkg.cfg.d"
    echo force-unsafe-io >"$r/etc/dpkg/dpkg.cfg.d/00warren-build"
    if [ -n "$WB_CACHE" ]; then
        mkdir -p "$r/var/cache/apt/archives/partial" "$r/var/lib/apt/lists/partial"
        [ -d "$WB_CACHE/archives" ] && copy_tree_files "$WB_CACHE/archives" "$r/var/cache/apt/archives"
        [ -d "$WB_CACHE/lists" ] && copy_tree_files "$WB_CACHE/lists" "$r/var/lib/apt/lists"
    fi
    return 0
}

hook_customize() {
    r=$1
    rm -f "$r/etc/dpkg/dpkg.cfg.d/00warren-build"
    if [ -n "$WB_CACHE" ]; then
        # Keep exactly what this build used: older versions drop out of the cache. A profile's
        # build adds to what is there instead (the base's packages are a subset of its own).
        for d in archives:var/cache/apt/archives lists:var/lib/apt/lists; do
            name=${d%%:*} src=$r/${d#*:}
            rm -rf "$WB_CACHE/$name.new"
            mkdir -p "$WB_CACHE/$name.new"
            [ "$WB_PROFILE" = base ] || [ "$name" = lists ] || [ ! -d "$WB_CACHE/$name" ] ||
                copy_tree_files "$WB_CACHE/$name" "$WB_CACHE/$name.new"
            copy_tree_files "$src" "$WB_CACHE/$name.new"
            rm -f "$WB_CACHE/$name.new/lock"
            rm -rf "$WB_CACHE/$name"
            mv "$WB_CACHE/$name.new" "$WB_CACHE/$name"
        done
    fi

    chroot "$r" useradd --create-home --uid 1000 --user-group --shell /bin/bash user
    echo 'user ALL=(ALL) NOPASSWD:ALL' >"$r/etc/sudoers.d/user"
    chmod 0440 "$r/etc/sudoers.d/user"
    chroot "$r" visudo -cq -f /etc/sudoers.d/user

    # sshd: every sandbox makes host keys of its own (`warren ssh` runs ssh-keygen -A the first
    # time); none is shared through the template. Nothing starts it at boot (there is no init
    # system), and the service links the package made are removed.
    rm -f "$r"/etc/ssh/ssh_host_*
    rm -f "$r"/etc/rc?.d/*ssh "$r"/etc/systemd/system/*.wants/ssh.service \
        "$r"/etc/systemd/system/sshd.service

    # Not the build machine's: minbase writes no /etc/hosts, and mmdebstrap copies the host's
    # /etc/hostname and /etc/resolv.conf. A sandbox's hostname is its id (set by Warren).
    printf '%s\n' '127.0.0.1	localhost' '::1		localhost ip6-localhost ip6-loopback' \
        'ff02::1		ip6-allnodes' 'ff02::2		ip6-allrouters' >"$r/etc/hosts"
    echo sandbox >"$r/etc/hostname"
    : >"$r/etc/resolv.conf"

    # Documentation, man pages and translations: removed now, and kept out of later installs.
    # (Not with mmdebstrap --dpkgopt during the build: it then extracts every essential package
    # through a python filter, which costs 5-10 s.)
    find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/lintian/*
    find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    printf '%s\n' '# Warren base template: no documentation, man pages or translations.' \
        'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
        'path-exclude=/usr/share/lintian/*' 'path-exclude=/usr/share/locale/*' \
        'path-include=/usr/share/locale/locale.alias' >"$r/etc/dpkg/dpkg.cfg.d/01warren-nodoc"

    profile_customize "$r"

    # mmdebstrap's cleanup removes the apt lists and .debs and its own logs after this hook.
    rm -f "$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old "$r/var/log/bootstrap.log"
    rm -rf "$r"/var/log/apt/* "$r"/var/tmp/*
    return 0
}

if [ "${1:-}" = --hook ]; then
    load_profile "${WB_PROFILE:-base}"
    case $2 in
    setup) hook_setup "$3" ;;
    customize) hook_customize "$3" ;;
    *) exit 2 ;;
    esac
    exit 0
fi

# ---- the build ---------------------------------------------------------------------------------

[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 OUTDIR [PROFILE]" >&2; exit 2; }
WB_PROFILE=${2:-base}
export WB_PROFILE
load_profile "$WB_PROFILE"
WB_NAME=$(basename "$WB_PROFILE" .sh) # the template's name, for messages and the cache
[ -z "$PROFILE_PACKAGES" ] || PACKAGES=$PACKAGES,$PROFILE_PACKAGES
[ "$(id -u)" = 0 ] || { echo "build-base: needs root (mmdebstrap builds as root)" >&2; exit 1; }
if ! command -v mmdebstrap >/dev/null 2>&1; then
    echo "build-base: installing mmdebstrap" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null ||
        { apt-get update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null; }
fi

mkdir -p "$1"
OUT=$(cd "$1" && pwd)
TMP=$OUT/rootfs.tmp
LOG=$OUT/build.log
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

# The machine's mirrors (deb822 first, then a one-line sources.list).
SRC=/etc/apt/sources.list.d/debian.sources
MIRROR=${WARREN_DEBIAN_MIRROR:-}
SECURITY=${WARREN_DEBIAN_SECURITY:-}
if [ -r "$SRC" ]; then
    [ -n "$MIRROR" ] || MIRROR=$(awk '/^URIs:/ { print $2; exit }' "$SRC")
    [ -n "$SECURITY" ] || SECURITY=$(awk '
        /^[ \t]*$/ { if (sec && uri) { print uri; exit } sec = 0; uri = "" }
        /^URIs:/ { uri = $2 }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i ~ /-security$/) sec = 1 }
        END { if (sec && uri) print uri }' "$SRC" | head -n1)
fi
if [ -z "$MIRROR" ] && [ -r /etc/apt/sources.list ]; then
    MIRROR=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
        /etc/apt/sources.list)
fi
MIRROR=${MIRROR:-http://deb.debian.org/debian}
[ "$SECURITY" != none ] || SECURITY=
set -- "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main"
[ -z "$SECURITY" ] || set -- "$@" "deb $SECURITY $SUITE-security main"

WB_CACHE=${WARREN_DEBCACHE:-$(dirname "$OUT")/.debcache}
if [ "$WB_CACHE" = none ]; then
    WB_CACHE=
else
    mkdir -p "$WB_CACHE"
    WB_CACHE=$(cd "$WB_CACHE" && pwd)
fi
export WB_CACHE

# Unmount whatever a killed mmdebstrap left mounted in the tree, then remove it without ever
# crossing into another filesystem.
remove_tree() {
    [ -e "$1" ] || return 0
    awk -v p="$1/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$1"
}

RCFILE=$(mktemp)
cleanup() {
    rm -f "$RCFILE"
    remove_tree "$TMP"
    remove_tree "$OUT/rootfs.old"
    rm -f "$OUT/config.json.tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
remove_tree "$TMP"

[ -t 2 ] && TTY=1 || TTY=0
echo "build-base: $WB_NAME: Debian $SUITE from $MIRROR into $OUT/rootfs (log: $LOG)" >&2
START=$(date +%s)

# The bar moves with the time the last build took (mmdebstrap's own step lines come late, in
# bursts), and never past 99 % before the end; a ticker redraws it every second on a tty.
EXPECT=75
[ -z "$WB_CACHE" ] || [ ! -s "$WB_CACHE/last-build-seconds-$WB_NAME" ] ||
    EXPECT=$(cat "$WB_CACHE/last-build-seconds-$WB_NAME")
{
    TICKER=
    if [ "$TTY" = 1 ]; then
        (while sleep 1; do echo @tick; done) &
        TICKER=$!
    fi
    # System tools only: a python3 or perl from a version manager's shims in PATH makes every
    # helper mmdebstrap starts slow.
    PATH=/usr/sbin:/usr/bin:/sbin:/bin mmdebstrap --verbose --mode=root --format=directory \
        --variant=minbase --include="$PACKAGES" \
        --aptopt='Acquire::Languages "none"' \
        --skip=essential/unlink \
        --setup-hook="sh '$SELF' --hook setup \"\$1\"" \
        --customize-hook="sh '$SELF' --hook customize \"\$1\"" \
        "$SUITE" "$TMP" "$@" 2>&1
    echo $? >"$RCFILE"
    [ -z "$TICKER" ] || kill "$TICKER" 2>/dev/null || true
} | awk -v tty="$TTY" -v logf="$LOG" -v start="$START" -v expect="$EXPECT" '
    function now() { srand(); return srand() }
    function show(    pct, n, t) {
        t = now() - start
        pct = int(100 * t / (expect > 0 ? expect : 75))
        if (pct > 99) pct = 99
        n = int(pct * 30 / 100)
        printf "\rbuild-base: [%s%s] %3d%% %3ds  %-30s", substr(hashes, 1, n),
            substr(dots, 1, 30 - n), pct, t, step > "/dev/stderr"
        fflush("/dev/stderr")
    }
    function enter(s) {
        step = s; nstep++
        if (tty) show()
        else printf "build-base: [%d/7] %s (%ds)\n", nstep, s, now() - start > "/dev/stderr"
    }
    BEGIN {
        hashes = "##############################"; dots = ".............................."
        step = "starting"; printf "" > logf
    }
    /^@tick$/ { show(); next }
    { printf "[%3ds] %s\n", now() - start, $0 >> logf }
    /^I: running apt-get update/ { enter("updating package lists") }
    /^I: downloading packages/ { enter("downloading packages") }
    /^I: extracting archives/ { enter("unpacking") }
    /^I: installing essential/ { enter("installing essential packages") }
    /^I: installing remaining/ { enter("installing the tools") }
    /^I: running --customize-hook/ { enter("adding the user, cleaning") }
    /^I: cleaning package lists/ { enter("finishing") }
    END { if (tty) printf "\n" > "/dev/stderr" }'

rc=$(cat "$RCFILE" 2>/dev/null || echo 1)
if [ "$rc" != 0 ]; then
    echo "build-base: mmdebstrap failed (exit $rc); the end of $LOG:" >&2
    tail -n 25 "$LOG" >&2
    exit 1
fi

# The tools are there and run (without /proc: node and python do not need it).
for c in "bash -c true" "python3 -c pass" "node -e 0" "git --version" "curl --version" "sudo --version"; do
    # shellcheck disable=SC2086
    chroot "$TMP" $c >/dev/null 2>&1 || { echo "build-base: \`$c\` does not run in the new rootfs" >&2; exit 1; }
done

# ... and the profile's own checks, one command per line.
if [ -n "$PROFILE_CHECKS" ]; then
    printf '%s\n' "$PROFILE_CHECKS" | while IFS= read -r c; do
        [ -n "$c" ] || continue
        chroot "$TMP" /bin/sh -c "$c" >/dev/null 2>&1 ||
            { echo "build-base: \`$c\` does not run in the new rootfs" >&2; exit 1; }
    done || exit 1
fi

profile_config >"$OUT/config.json.tmp"
remove_tree "$OUT/rootfs.old"
[ ! -e "$OUT/rootfs" ] && [ ! -L "$OUT/rootfs" ] || mv "$OUT/rootfs" "$OUT/rootfs.old"
mv "$TMP" "$OUT/rootfs"
mv "$OUT/config.json.tmp" "$OUT/config.json"
remove_tree "$OUT/rootfs.old"

ELAPSED=$(($(date +%s) - START))
[ -z "$WB_CACHE" ] || echo "$ELAPSED" >"$WB_CACHE/last-build-seconds-$WB_NAME"
SIZE=$(du -sm "$OUT/rootfs" | cut -f1)
NPKG=$(chroot "$OUT/rootfs" dpkg-query -W -f='.\n' | wc -l)
echo "build-base: $WB_NAME done in $ELAPSED s: $OUT/rootfs, $SIZE MB, $NPKG packages" >&2
