"""The `base` template (Debian bookworm, scripts/build-base.sh) through a real daemon and the SDK.

test.sh builds the template once (/var/cache/warren/test-templates/base) and exports its directory
as WARREN_BASE_TEMPLATE; without it these tests are skipped, except under CI (CI=true), where that
is a failure.
"""

import os
import shutil
import tempfile

import pytest

import warren
from conftest import Daemon, delete_all

BASE = os.environ.get("WARREN_BASE_TEMPLATE")

if not BASE:
    if os.environ.get("CI") == "true":
        pytest.fail("WARREN_BASE_TEMPLATE is not set (test.sh builds the template and sets it)",
                    pytrace=False)
    pytest.skip("WARREN_BASE_TEMPLATE is not set: run ./test.sh, or scripts/build-base.sh DIR "
                "and WARREN_BASE_TEMPLATE=DIR", allow_module_level=True)


@pytest.fixture(scope="module")
def base_daemon():
    rootfs = os.path.join(os.path.abspath(BASE), "rootfs")
    assert os.path.exists(os.path.join(rootfs, "bin/bash")), "no base template in %s" % BASE
    top = tempfile.mkdtemp(prefix="warrend-base-")
    tdir = os.path.join(top, "state", "templates", "base")
    os.makedirs(tdir)
    os.symlink(rootfs, os.path.join(tdir, "rootfs"))
    shutil.copy(os.path.join(BASE, "config.json"), tdir)
    d = Daemon(state_dir=top).start()
    yield d
    try:
        delete_all(d)
    finally:
        d.cleanup()


@pytest.fixture
def sb(base_daemon):
    c = base_daemon.client()
    with warren.Sandbox.create(client=c, timeout=120) as s:
        yield s
    c.close()


def sh(sb, cmd, **kw):
    return sb.commands.run(cmd, **kw).stdout


def test_default_user_cwd_and_env(sb):
    assert sh(sb, "id -u; id -un; id -g; pwd; echo $HOME; echo $LANG").split() == \
        ["1000", "user", "1000", "/home/user", "/home/user", "C.UTF-8"]
    assert sh(sb, "getent passwd user").strip() == "user:x:1000:1000::/home/user:/bin/bash"
    assert sh(sb, ["bash", "-lc", 'echo "$0 $BASH_VERSION" | cut -c1-6']) == "bash 5\n"
    assert "/usr/bin" in sh(sb, ["bash", "-lc", "echo $PATH"]).split(":")


def test_the_tools_run(sb):
    assert sh(sb, "python3 -c 'print(6*7)'") == "42\n"
    assert sh(sb, "node -e 'console.log(42)'") == "42\n"
    assert sh(sb, "git --version").startswith("git version 2.")
    assert sh(sb, "curl --version").startswith("curl 7.")
    ps = sh(sb, "ps aux")
    assert ps.splitlines()[0].split()[:2] == ["USER", "PID"] and "ps aux" in ps
    # git works as the user, in the home directory.
    out = sh(sb, "git init -q repo && cd repo && git -c user.name=u -c user.email=u@x "
                 "commit -q --allow-empty -m first && git log --format=%s")
    assert out == "first\n"


def test_passwordless_sudo(sb):
    assert sh(sb, "stat -c '%a %U' /etc/sudoers.d/user") == "440 root\n"
    # The template asks for setuid programs to work ("setuid": true in its config.json), so
    # no_new_privs is off here; the busybox test image keeps it on (test_isolation's probe).
    assert "NoNewPrivs:\t0" in sh(sb, "cat /proc/self/status")
    sh(sb, "sudo -n true")
    r = sb.commands.run("sudo -n id -u")
    assert r.stdout == "0\n" and "unable to resolve" not in r.stderr
    assert sh(sb, "sudo -n sh -c 'echo ok > /etc/from-sudo' && cat /etc/from-sudo") == "ok\n"


def test_localhost_and_the_hostname_resolve(sb):
    # The hostname is the sandbox's id; libnss-myhostname resolves it (sudo and others look it up).
    assert sh(sb, "hostname") == sb.sandbox_id + "\n"
    assert sh(sb, "getent hosts $(hostname) >/dev/null && echo ok") == "ok\n"
    assert sh(sb, "getent hosts localhost").split()[0] in ("127.0.0.1", "::1")
    assert sh(sb, "python3 -c 'import socket; print(socket.gethostbyname(\"localhost\"))'") == \
        "127.0.0.1\n"
    # A server on localhost (both ::1 and 127.0.0.1: node tries ::1 first), reached by name.
    sb.commands.run("python3 -m http.server -b :: 8123 >/dev/null 2>&1", background=True)
    assert sh(sb, "for i in $(seq 50); do curl -sf -o /dev/null localhost:8123 && break; "
                  "sleep 0.1; done; curl -s -o /dev/null -w '%{http_code}' http://localhost:8123/") \
        == "200"
    assert sh(sb, "node -e 'fetch(\"http://localhost:8123/\").then(r => console.log(r.status))'") \
        == "200\n"
    assert sh(sb, "python3 -c 'import urllib.request as u; "
                  "print(u.urlopen(\"http://localhost:8123/\").status)'") == "200\n"


def test_home_is_the_users(sb):
    sh(sb, "echo hi > /home/user/note.txt && mkdir -p /home/user/a/b && touch /home/user/a/b/c")
    assert sh(sb, "stat -c '%u:%g' /home/user /home/user/note.txt /home/user/a/b/c").split() == \
        ["1000:1000"] * 3
    assert sb.files.read("/home/user/note.txt") == "hi\n"
    sb.files.write("/home/user/from-api.txt", "api\n")
    assert sh(sb, "cat ~/from-api.txt") == "api\n"
    # The user cannot write where only root can.
    assert sb.commands.run("touch /etc/nope", check=False).exit_code != 0


def test_image_files_are_owned_by_root_inside(sb):
    for path in ("/usr/bin/python3", "/usr/bin/sudo", "/etc/passwd"):
        fields = sh(sb, "ls -lnL " + path).split()
        assert fields[2:4] == ["0", "0"], (path, fields)
    assert sh(sb, "stat -c '%a' /usr/bin/sudo") == "4755\n"
    # No leftovers from the build machine or from apt.
    assert sh(sb, "cat /etc/hostname") == "sandbox\n"
    assert sh(sb, "ls /var/lib/apt/lists /var/cache/apt/archives | grep -c deb || true") == "0\n"
    assert sh(sb, "ls /usr/local/share/ca-certificates | wc -l") == "0\n"
