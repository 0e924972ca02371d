"""Shared fixtures for the integration tests.

Every test runs the real `warren` binary as root against real sandboxes. Each test session uses
its own run directory, cgroup parent and uid pool so it cannot disturb a Warren that is running
on the same host, and after every test `leftovers` asserts that nothing was left behind: no
run directory, no cgroup, no process in the pool's uid range, no mount.
"""

import os
import subprocess
import time

import pytest

BUILD = os.environ.get("WARREN_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
WARREN = os.path.join(BUILD, "warren")
# `make asan` runs this suite on binaries built with ASan+UBSan (in build-asan).
SANITIZED = os.path.basename(os.path.normpath(BUILD)) == "build-asan"
IMAGE = os.path.join(BUILD, "images", "busybox")
# The Debian templates test.sh builds (scripts/templates/): Daemon(templates=(NAME,)) links them.
TEST_TEMPLATES = os.environ.get("WARREN_TEST_TEMPLATES", "/var/cache/warren/test-templates")


def template_dir(name):
    """The directory of the test template NAME (rootfs/, config.json), or skip the test when
    test.sh has not built it (it always does: scripts/templates/NAME.sh)."""
    d = os.path.join(TEST_TEMPLATES, name)
    if not os.path.exists(os.path.join(d, "rootfs", "bin", "bash")):
        pytest.skip("test template %s is not built (test.sh builds it into %s)" % (name, TEST_TEMPLATES))
    return d
# The fault hooks the tests drive (WARREN_FAULT, WARREN_CRASH) exist only in a test build (the
# Makefile's TESTING=1, which `make test`, `make integration` and test.sh use).
if not os.path.exists(os.path.join(BUILD, ".config-testing-1")):
    pytest.exit("%s is not a test build: build it with `make TESTING=1` (or run `make integration`)"
                % BUILD, returncode=2)
RUN_DIR = "/run/warren-test-%d" % os.getpid()
CGROUP_PARENT = "warren-test-%d" % os.getpid()
UID_SLOTS = 64
# A pool of its own, away from the default one (2^30) and from other test sessions running at
# the same time (their run directories, and so their pools' lock files, differ).
UID_BASE = 0x60000000 + (os.getpid() % 64) * UID_SLOTS * 65536

ENV = dict(
    os.environ,
    WARREN_RUN_DIR=RUN_DIR,
    WARREN_CGROUP_PARENT=CGROUP_PARENT,
    WARREN_UID_BASE=str(UID_BASE),
    WARREN_UID_SLOTS=str(UID_SLOTS),
)


def warren(*args, input=None, timeout=60, env=None, check=False):
    """Run `warren ARGS...` and return the CompletedProcess (bytes)."""
    e = dict(ENV)
    if env:
        e.update(env)
    return subprocess.run(
        [WARREN, *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env=e,
        check=check,
    )


def warren_popen(*args, env=None, **kw):
    e = dict(ENV)
    if env:
        e.update(env)
    return subprocess.Popen([WARREN, *args], env=e, **kw)


def run(*cmd, **kw):
    """`warren run -- CMD...` in the test image."""
    return warren("run", "--rootfs", IMAGE, "--", *cmd, **kw)


# Daemons of this session that are running: their warm sandboxes (warrend --warm) are theirs,
# not something a test left behind.
LIVE_DAEMONS = set()


def warm_ids():
    """Ids of the warm sandboxes of the running daemons (their markers, <state>/warm/<id>,
    exist from before each is made until a create takes it)."""
    ids = set()
    for d in list(LIVE_DAEMONS):
        try:
            ids |= set(os.listdir(os.path.join(d.state, "warm")))
        except OSError:
            pass
    return ids


def homes(d):
    """The writable layers in d's state directory, but those of its warm sandboxes."""
    try:
        warm = set(os.listdir(os.path.join(d.state, "warm")))
    except OSError:
        warm = set()
    return sorted(set(os.listdir(os.path.join(d.state, "sandboxes"))) - warm)


def init_pid(sid):
    """The host pid of a sandbox's warren-init (its cgroup's first process), or None."""
    root = "/sys/fs/cgroup"
    for hier in sorted(os.listdir(root)):
        p = os.path.join(root, hier, CGROUP_PARENT, sid, "cgroup.procs")
        try:
            with open(p) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        return min(pids) if pids else None
    return None


def pool_pids(include_warm=False):
    """Host pids of processes whose real uid is in the test pool's range (but those of warm
    sandboxes, unless include_warm). A pre-cloned child (`warrend --pool`) waiting for its
    sandbox has only its effective uid there (its user namespace's owner) and is not counted."""
    lo, hi = UID_BASE, UID_BASE + UID_SLOTS * 65536
    warm = set() if include_warm else warm_ids()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                for line in f:
                    if line.startswith("Uid:"):
                        uids = [int(x) for x in line.split()[1:]]
                        if lo <= uids[0] < hi:
                            found.append(int(d))
                        break
            if warm and found and found[-1] == int(d):
                with open("/proc/%s/cgroup" % d) as f:
                    cg = f.read()
                if any(w in cg for w in warm):
                    found.pop()
        except OSError:
            pass
    return found


def cgroup_dirs():
    """Sandbox cgroups left under the test parent, in every hierarchy (not warm sandboxes')."""
    left = []
    warm = warm_ids()
    root = "/sys/fs/cgroup"
    for hier in os.listdir(root):
        p = os.path.join(root, hier, CGROUP_PARENT)
        if os.path.isdir(p):
            left += [os.path.join(p, c) for c in os.listdir(p)
                     if os.path.isdir(os.path.join(p, c)) and c not in warm]
    return left


def run_dir_entries():
    p = os.path.join(RUN_DIR, "sandboxes")
    warm = warm_ids()
    return [e for e in os.listdir(p) if e not in warm] if os.path.isdir(p) else []


def mount_lines():
    """Mounts of this session's sandboxes left behind. The network slots of running daemons
    (RUN_DIR/net/<table>/<i>, held on purpose: they outlive a daemon) are not sandboxes';
    Daemon.cleanup removes a daemon's. Another test session's run directory (a gvisor sandbox's
    root and control socket are mounts of the host's) is that session's business."""
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if (RUN_DIR in l or "warren" in l.split()[4])
                and not ("/net/" in l.split()[4] and " nsfs " in l)
                and not (l.split()[4].startswith("/run/warren-test-")
                         and not l.split()[4].startswith(RUN_DIR + "/"))]


def wait_clean(timeout=5.0):
    """Leftovers after a short grace period (processes of a killed sandbox exit asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        left = {
            "pids": pool_pids(),
            "cgroups": cgroup_dirs(),
            "run_dir": run_dir_entries(),
            "mounts": mount_lines(),
        }
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def leftovers():
    """After every test: no leftover process, cgroup, run directory or mount."""
    yield
    left = wait_clean()
    assert not any(left.values()), "left behind: %r" % left


def pytest_sessionfinish(session, exitstatus):
    # The last sandboxes' cgroups may still be going away (a killed sandbox's processes exit
    # asynchronously): the parent cannot be removed before they are.
    root = "/sys/fs/cgroup"
    deadline = time.monotonic() + 10
    for hier in os.listdir(root):
        p = os.path.join(root, hier, CGROUP_PARENT)
        while os.path.isdir(p):
            try:
                os.rmdir(p)
            except OSError as e:
                if time.monotonic() > deadline:
                    print("\nleft behind: %s (%s)" % (p, e.strerror))
                    break
                time.sleep(0.05)
    if INTERNET is not None:
        INTERNET.stop()
    subprocess.run(["rm", "-rf", RUN_DIR])


# ---- the daemon --------------------------------------------------------------------------------

import contextlib
import re
import shutil
import signal as _signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../sdk/python"))

WARREND = os.path.join(BUILD, "warrend")


# ---- networking ---------------------------------------------------------------------------------
# Every test daemon has networking, on an address pool and nftables table of its own (several
# daemons, and several test sessions, run at once), internet off unless a test says, and its DNS
# upstream the test internet's server (netfix.py): nothing a sandbox does reaches past the
# namespaces the tests made.

_net_seq = [0]
INTERNET = None


def internet():
    """The session's test internet (netfix.Internet), started on first use."""
    global INTERNET
    if INTERNET is None:
        import netfix
        INTERNET = netfix.Internet().start()
    return INTERNET


def net_args():
    _net_seq[0] += 1
    k = (os.getpid() * 64 + _net_seq[0]) % 16384
    pool = "10.%d.%d.0/24" % (128 + k // 256, k % 256)
    table = "wt%d_%d" % (os.getpid(), _net_seq[0])
    return ["--net-pool", pool, "--net-table", table, "--net-default", "off", "--net-ready", "2",
            "--dns-upstream", internet().dns], table


def net_cleanup(table):
    """Remove what a daemon's networking left (on purpose: slots outlive a daemon)."""
    d = os.path.join(RUN_DIR, "net", table)
    if os.path.isdir(d):
        for e in os.listdir(d):
            p = os.path.join(d, e)
            subprocess.run(["umount", "-l", p], stderr=subprocess.DEVNULL)
            try:
                os.unlink(p)
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)
    subprocess.run(["nft", "delete", "table", "inet", table], stderr=subprocess.DEVNULL)


def ready_tcp(line):
    """(host, port) of the TCP listener named by warrend's ready line ("warrend ready ...
    tcp=HOST:PORT", HOST an IPv4 address or a bracketed IPv6 one, which stays bracketed), or
    (None, None) when the line names none."""
    m = re.search(r"(?:^|\s)tcp=(\[[0-9A-Fa-f:.]+\]|[0-9.]+):(\d+)(?:\s|$)", line)
    return (m.group(1), int(m.group(2))) if m else (None, None)


class Daemon:
    """A real warrend on a temporary state directory, a unix socket and a TCP port (`listen`:
    a loopback port unless asked; clusterfix.py's nodes listen on their namespace's address)."""

    def __init__(self, *extra_args, state_dir=None, env=None, binary=None, prefix=(), templates=(),
                 listen="127.0.0.1:0"):
        self.binary = binary or WARREND
        self.prefix = list(prefix)  # a command that runs warrend, e.g. prlimit, nsenter --net=...
        self.listen = listen  # --listen: a cluster's node listens on its namespace's address
        self.net, self.table = net_args()  # first: a test internet that fails leaves no directory
        self.dir = state_dir or tempfile.mkdtemp(prefix="warrend-test-")
        self.env = dict(ENV, **(env or {}))
        self.state = os.path.join(self.dir, "state")
        self.sock = os.path.join(self.dir, "warrend.sock")
        self.extra = list(extra_args)
        tdir = os.path.join(self.state, "templates", "base")
        os.makedirs(tdir, exist_ok=True)
        if not os.path.exists(os.path.join(tdir, "rootfs")):
            os.symlink(os.path.abspath(IMAGE), os.path.join(tdir, "rootfs"))
        for name in templates:  # test templates, used in place (rootfs) with their config
            src = template_dir(name)
            tdir = os.path.join(self.state, "templates", name)
            os.makedirs(tdir, exist_ok=True)
            if not os.path.lexists(os.path.join(tdir, "rootfs")):
                os.symlink(os.path.join(src, "rootfs"), os.path.join(tdir, "rootfs"))
            shutil.copyfile(os.path.join(src, "config.json"), os.path.join(tdir, "config.json"))
        self.proc = None
        self.host = None
        self.port = None

    def start(self):
        self.log = open(os.path.join(self.dir, "warrend.log"), "ab")
        self.proc = subprocess.Popen(
            [*self.prefix, self.binary, "--state-dir", self.state, "--socket", self.sock, "--listen", self.listen,
             "--run-dir", RUN_DIR, *self.net, *self.extra],
            stdout=subprocess.PIPE, stderr=self.log, env=self.env)
        LIVE_DAEMONS.add(self)
        line = self.proc.stdout.readline().decode()
        self.host, self.port = ready_tcp(line)
        assert self.port, "warrend did not start: %r (its log: %s)" % (line, os.path.join(self.dir, "warrend.log"))
        return self

    @property
    def url(self):
        return "unix://" + self.sock

    @property
    def tcp_url(self):
        return "http://%s:%d" % (self.host, self.port)

    @property
    def admin_key(self):
        with open(os.path.join(self.state, "admin.key")) as f:
            return f.read().strip()

    def kill9(self):
        self.proc.send_signal(_signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(_signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def client(self, key=None, tcp=False):
        import warren
        return warren.Client(self.tcp_url if tcp else self.url, key)

    def cleanup(self):
        """Stop, then delete every sandbox the state still knows (through a fresh daemon).
        Under `make asan`, a daemon whose log holds a sanitizer report (a leak found at exit,
        say) fails the test that owned it."""
        self.stop()
        LIVE_DAEMONS.discard(self)
        net_cleanup(self.table)
        report = ""
        if SANITIZED and os.path.exists(os.path.join(self.dir, "warrend.log")):  # it ran
            with open(os.path.join(self.dir, "warrend.log"), errors="replace") as f:
                log = f.read()
            for marker in ("ERROR: LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:"):
                if marker in log:
                    at = log.index(marker)
                    report = log[log.rfind("\n", 0, at) + 1:][:4000]
                    break
        shutil.rmtree(self.dir, ignore_errors=True)
        assert not report, "warrend reported under the sanitizers:\n" + report


class LoopMountError(Exception):
    """The kernel refused to mount the filesystem the test made (mount's exit status)."""


@contextlib.contextmanager
def loop_fs(prefix, size, mkfs, options="loop"):
    """A filesystem made by the test in a file (`mkfs` + [image]), loop-mounted with `options`;
    yields its mount point, then unmounts and removes everything. A tool that is missing fails
    the test (scripts/deps.sh installs them); a refused mount raises LoopMountError."""
    if shutil.which(mkfs[0]) is None:
        pytest.fail("%s is missing: scripts/deps.sh installs it" % mkfs[0])
    top = tempfile.mkdtemp(prefix=prefix)
    img, mnt = os.path.join(top, "fs.img"), os.path.join(top, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(size)
    subprocess.run(mkfs + [img], check=True, stdout=subprocess.DEVNULL)
    if subprocess.run(["mount", "-o", options, img, mnt]).returncode != 0:
        shutil.rmtree(top, ignore_errors=True)
        raise LoopMountError(" ".join(mkfs))
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", mnt]).returncode != 0:
            subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(top, ignore_errors=True)


@contextlib.contextmanager
def daemon_on(state_dir, *args):
    """A Daemon whose state directory is state_dir; every sandbox deleted and the daemon stopped
    at the end."""
    d = Daemon(*args, state_dir=state_dir).start()
    try:
        yield d
    finally:
        try:
            delete_all(d)
        finally:
            d.cleanup()


def delete_all(d):
    import warren
    c = d.client()
    for sb in list(warren.Sandbox.list(client=c, state=["creating", "running", "paused", "stopped", "error"])):
        try:
            warren.Sandbox.connect(sb.sandbox_id, client=c).kill()
        except warren.NotFoundError:
            pass
        except warren.WarrenError:
            c.request("DELETE", "/v1/sandboxes/" + sb.sandbox_id, check=False)


def make_teams(d, *names):
    """A key and a TCP client per team name, made by d's admin: {"admin": the admin's client,
    NAME: that team's client, NAME + "_key": its warren.admin key record (.key, .id)}."""
    import warren
    admin = d.client()
    out = {"admin": admin}
    for name in names:
        k = warren.admin.create_key(name, client=admin)
        out[name] = warren.Client(d.tcp_url, k.key)
        out[name + "_key"] = k
    return out


@pytest.fixture(scope="module")
def daemon(backend):
    """The module's daemon; in a module with BACKENDS (below), one per backend, whose
    `--runtimes` names that backend first, so every sandbox the module's tests make without
    naming a runtime (through the SDK, the CLI, E2B's protocol, a template build) runs on it."""
    d = Daemon(*(("--runtimes", "gvisor,ns") if backend == "gvisor" else ())).start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


@pytest.fixture
def client(daemon):
    c = daemon.client()
    yield c
    c.close()


# A module that sets BACKENDS = ("ns", "gvisor") runs each of its tests that use the module's
# daemon on both isolation backends (the test ids say which): the `backend` parameter, module
# scoped, picks the daemon's default runtime. A test that cannot apply to one of them says so
# with pytest.mark.backends("ns", reason="..."): it shows as skipped there, with the reason. WARREN_TEST_BACKENDS narrows the
# set (test.sh's ASan pass: ns; tests/integration/test_gvisor.py runs there all the same).
# Without runsc, gvisor's are skipped, saying so (outside CI; scripts/deps.sh installs it).
def backends_to_test():
    return os.environ.get("WARREN_TEST_BACKENDS", "ns,gvisor").split(",")


def pytest_generate_tests(metafunc):
    backends = getattr(metafunc.module, "BACKENDS", None)
    if backends is None or "daemon" not in metafunc.fixturenames:
        return
    mark = metafunc.definition.get_closest_marker("backends")
    params = []
    for b in (b for b in backends if b in backends_to_test()):
        if mark is not None and b not in mark.args:
            b = pytest.param(b, marks=pytest.mark.skip(
                reason="not on %s: %s" % (b, mark.kwargs.get("reason", "(no reason given)"))))
        params.append(b)
    metafunc.parametrize("backend", params, scope="module")


def pytest_configure(config):
    config.addinivalue_line("markers", "backends(*names, reason): the isolation backends a test "
                            "applies to, and why not the others")


def pytest_report_header(config):
    return "backends of BACKENDS modules: %s (WARREN_TEST_BACKENDS)" % ",".join(backends_to_test())


@pytest.fixture(scope="module")
def backend():
    return "ns"


@pytest.fixture(autouse=True)
def _runsc_for_gvisor(request):
    import shutil
    if "backend" in request.fixturenames and request.getfixturevalue("backend") == "gvisor" \
            and shutil.which("runsc") is None and not os.environ.get("CI"):
        pytest.skip("runsc is not installed (scripts/deps.sh installs it)")


@pytest.fixture
def sandbox(client, backend):
    import warren
    sb = warren.Sandbox.create(client=client, timeout=120)
    assert sb.get_info().runtime == backend
    yield sb
    try:
        sb.kill()
    except warren.NotFoundError:
        pass
