"""The `warren` command's daemon-facing verbs (docs/cli.md), run as a real binary against a real
warrend: config, login, create, ls, info, exec, shell, cp, rm and timeout, and how it fails."""

import fcntl
import hashlib
import json
import os
import pty
import re
import select
import signal
import stat
import struct
import subprocess
import termios
import time
from datetime import datetime

import pytest

from conftest import ENV, WARREN

BACKENDS = ("ns", "gvisor")  # every test on the module's daemon runs on both (conftest.py)

# ---- helpers -------------------------------------------------------------------------------------


class Cli:
    """Runs build/warren with a private HOME (so a private config file) and a given endpoint."""

    def __init__(self, daemon, home):
        self.daemon = daemon
        self.home = str(home)
        self.env = {k: v for k, v in ENV.items()
                    if k not in ("XDG_CONFIG_HOME", "WARREN_API_URL", "WARREN_API_KEY",
                                 "WARREN_REQUEST_ID")}
        self.env.update(HOME=self.home, WARREN_API_URL=daemon.url)

    @property
    def config_file(self):
        return os.path.join(self.home, ".config", "warren", "config.json")

    def environ(self, env=None):
        e = dict(self.env)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def __call__(self, *args, input=None, env=None, timeout=30, stdin=None):
        kw = dict(stdin=stdin) if stdin is not None else dict(input=input)
        if stdin is None and input is None:
            kw = dict(stdin=subprocess.DEVNULL)
        return subprocess.run([WARREN, *args], capture_output=True, timeout=timeout,
                              env=self.environ(env), **kw)

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        return r.stdout.decode()

    def json(self, *args, **kw):
        return json.loads(self.ok(*args, "-o", "json", **kw))

    def create(self, *args):
        sid = self.ok("create", "--timeout", "120", *args).strip()
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", sid), sid
        return sid

    def rm(self, *ids):
        """Best-effort cleanup; returns the CompletedProcess."""
        return self("rm", *ids)

    def pty(self, *args, send=None, env=None, timeout=20, size=None):
        """Run warren with stdin/stdout/stderr on a new pseudo-terminal (of `size` rows, cols);
        once it has printed something (or after 3 s), write `send`. Returns (exit status,
        everything it printed)."""
        master, slave = pty.openpty()
        if size:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
        p = subprocess.Popen([WARREN, *args], stdin=slave, stdout=slave, stderr=slave,
                             env=self.environ(env), start_new_session=True, close_fds=True)
        os.close(slave)
        out = b""
        sent = send is None
        deadline = time.monotonic() + timeout
        first_output = time.monotonic() + 3
        try:
            while time.monotonic() < deadline:
                if not sent and (out or time.monotonic() > first_output):
                    os.write(master, send)
                    sent = True
                r, _, _ = select.select([master], [], [], 0.1)
                if r:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # EIO: every holder of the slave side is gone
                        break
                    if not chunk:
                        break
                    out += chunk
                elif p.poll() is not None and not select.select([master], [], [], 0.2)[0]:
                    break
            else:
                p.kill()
                pytest.fail("warren %s did not finish under a pty; output %r" % (args, out))
            return p.wait(timeout=5), out
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(master)


@pytest.fixture
def cli(daemon, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return Cli(daemon, home)


@pytest.fixture
def sid(cli):
    """A sandbox made with `warren create`, removed with `warren rm`."""
    s = cli.create()
    try:
        yield s
    finally:
        r = cli.rm(s)
        assert r.returncode == 0 or b"not_found" in r.stderr, r.stderr


def one_error_line(r, verb=None):
    """stderr is exactly one line `warren: ...` (for `verb`: `warren: VERB...`)."""
    err = r.stderr.decode()
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("warren: " + (verb or "")), err
    return err


def sha(b):
    return hashlib.sha256(b).hexdigest()


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


# ---- config and login ------------------------------------------------------------------------------


def test_config_set_and_show(cli, daemon):
    key = daemon.admin_key
    cli.ok("config", "set", "endpoint", daemon.tcp_url)
    cli.ok("config", "set", "key", key)
    st = os.stat(cli.config_file)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(cli.config_file)).st_mode) == 0o700
    with open(cli.config_file) as f:
        assert json.load(f) == {"endpoint": daemon.tcp_url, "key": key}

    # The file is used when the environment says nothing; the key is masked.
    noenv = {"WARREN_API_URL": None}
    out = cli.ok("config", "show", env=noenv)
    assert key not in out and key[:4] + "****" in out and "(%d chars)" % len(key) in out
    assert "endpoint: %s (config)" % daemon.tcp_url in out
    assert "file:     %s" % cli.config_file in out
    j = cli.json("config", "show", env=noenv)
    assert j["endpoint"] == daemon.tcp_url and j["endpoint_from"] == "config"
    assert j["key_from"] == "config" and key not in json.dumps(j) and j["key"].startswith(key[:4])
    assert "sandboxes" in cli.json("ls", env=noenv)  # really talks TCP with the saved key

    # The environment overrides the file.
    j = cli.json("config", "show", env={"WARREN_API_URL": daemon.url, "WARREN_API_KEY": "k" * 20})
    assert j["endpoint"] == daemon.url and j["endpoint_from"] == "env WARREN_API_URL"
    assert j["key_from"] == "env WARREN_API_KEY" and "k" * 20 not in j["key"]

    # "-" reads the key from stdin; "" removes it.
    cli.ok("config", "set", "key", "-", input=b"wr_from_stdin_0123456789\n")
    with open(cli.config_file) as f:
        assert json.load(f)["key"] == "wr_from_stdin_0123456789"
    cli.ok("config", "set", "key", "")
    with open(cli.config_file) as f:
        assert json.load(f) == {"endpoint": daemon.tcp_url}
    assert "key:      - (none)" in cli.ok("config", "show", env=noenv)
    assert stat.S_IMODE(os.stat(cli.config_file).st_mode) == 0o600

    # Bad input: a refused URL, an unknown setting. Nothing changes.
    for args in (("config", "set", "endpoint", "https://127.0.0.1:1"),
                 ("config", "set", "endpoint", "http://127.0.0.1:99999"),
                 ("config", "set", "endpoint", "http://127.0.0.1:0"),
                 ("config", "set", "endpoint", "http://127.0.0.1:7860/v1"),
                 ("config", "set", "endpoint", "unix://relative.sock"),
                 ("config", "set", "colour", "red"),
                 ("config", "set", "endpoint"),
                 ("config", "frobnicate")):
        r = cli(*args)
        assert r.returncode == 2, (args, r)
        one_error_line(r, "config")
    with open(cli.config_file) as f:
        assert json.load(f) == {"endpoint": daemon.tcp_url}
    for url in ("http://[::1]:7860", "http://localhost", daemon.tcp_url + "/", daemon.url):
        cli.ok("config", "set", "endpoint", url)
        assert cli.json("config", "show", env=noenv)["endpoint"] == url

    # $XDG_CONFIG_HOME moves the file.
    xdg = os.path.join(cli.home, "xdg")
    cli.ok("config", "set", "key", "xdg-key-0123456789", env={"XDG_CONFIG_HOME": xdg})
    with open(os.path.join(xdg, "warren", "config.json")) as f:
        assert json.load(f) == {"key": "xdg-key-0123456789"}
    assert stat.S_IMODE(os.stat(os.path.join(xdg, "warren", "config.json")).st_mode) == 0o600

    # A malformed file is an error (exit 1, one line), for every verb that reads it.
    with open(cli.config_file, "w") as f:
        f.write("{not json")
    for args in (("config", "show"), ("ls",), ("config", "set", "key", "k")):
        r = cli(*args)
        assert r.returncode == 1 and cli.config_file in one_error_line(r), (args, r)


def test_login(cli, daemon):
    key = daemon.admin_key
    # A wrong key is refused and nothing is saved.
    r = cli("login", "--endpoint", daemon.tcp_url, "--key", "wr_" + "0" * 64)
    assert r.returncode == 1
    assert "unauthorized" in one_error_line(r, "login")
    assert not os.path.exists(cli.config_file)

    r = cli("login", "--endpoint", daemon.tcp_url, "--key", key)
    assert r.returncode == 0, r.stderr
    assert "logged in to %s" % daemon.tcp_url in r.stderr.decode()
    assert stat.S_IMODE(os.stat(cli.config_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(cli.config_file)).st_mode) == 0o700
    with open(cli.config_file) as f:
        assert json.load(f) == {"endpoint": daemon.tcp_url, "key": key}
    noenv = {"WARREN_API_URL": None}
    assert "sandboxes" in cli.json("ls", env=noenv)

    # --key - reads stdin; --no-verify saves a key that does not work.
    cli.ok("login", "--key", "-", input=(key + "\n").encode(), env=noenv)
    with open(cli.config_file) as f:
        assert json.load(f)["key"] == key
    cli.ok("login", "--key", "wr_bogus_key_123", "--no-verify", env=noenv)
    with open(cli.config_file) as f:
        assert json.load(f) == {"endpoint": daemon.tcp_url, "key": "wr_bogus_key_123"}
    assert stat.S_IMODE(os.stat(cli.config_file).st_mode) == 0o600
    r = cli("ls", env=noenv)
    assert r.returncode == 1 and "unauthorized" in one_error_line(r, "ls")

    r = cli("login")
    assert r.returncode == 2
    one_error_line(r, "login")


# ---- create, info, ls, timeout, rm ----------------------------------------------------------------


def test_create_with_options_and_info(cli):
    sb = cli.json("create", "--template", "base", "--cpus", "0.5", "--memory", "1.5g",
                  "--timeout", "90", "--env", "GREETING=hello there", "--env", "EMPTY=",
                  "--metadata", "task=42", "--metadata", "who=cli-test")
    try:
        assert sb["template"] == "base" and sb["state"] == "running"
        assert sb["cpus"] == 0.5 and sb["memory_mb"] == 1536
        assert sb["metadata"] == {"task": "42", "who": "cli-test"}
        left = (ts(sb["expires_at"]) - ts(sb["created_at"])).total_seconds()
        assert 89 <= left <= 91, left

        info = cli.json("info", sb["id"])
        assert info["id"] == sb["id"] and info["cpus"] == 0.5 and info["memory_mb"] == 1536
        assert info["metadata"] == sb["metadata"] and info["expires_at"] == sb["expires_at"]
        text = cli.ok("info", sb["id"])
        assert "id:         %s\n" % sb["id"] in text and "memory:     1536M\n" in text
        assert "metadata:   task=42\n" in text and "state:      running\n" in text

        # --env reaches every command.
        out = cli.ok("exec", sb["id"], "--", "sh", "-c", 'echo "[$GREETING][${EMPTY-unset}]"')
        assert out == "[hello there][]\n"
    finally:
        assert cli.rm(sb["id"]).returncode == 0

    # A retried create with the same idempotency key gets the same sandbox.
    first = cli.create("--idempotency-key", "cli-idem-1")
    try:
        assert cli.create("--idempotency-key", "cli-idem-1") == first
    finally:
        assert cli.rm(first).returncode == 0

    # The plain form prints only the id, on one line.
    out = cli.ok("create", "--timeout", "60", "--memory", "256M")
    try:
        assert re.fullmatch(r"[A-Za-z0-9_-]+\n", out), out
        assert cli.json("info", out.strip())["memory_mb"] == 256
    finally:
        assert cli.rm(out.strip()).returncode == 0

    for args in (["--cpus", "lots"], ["--memory", "12Q"], ["--timeout", "0"], ["--env", "NOEQ"],
                 ["--metadata", "=v"], ["-o", "yaml"], ["extra"]):
        r = cli("create", *args)
        assert r.returncode == 2 and r.stdout == b"", (args, r)
        one_error_line(r, "create")
    r = cli("create", "--template", "no-such-template")
    assert r.returncode == 1 and r.stdout == b""
    one_error_line(r, "create")


def test_ls_filters_and_formats(cli):
    a = cli.create("--metadata", "batch=ls1", "--metadata", "n=a")
    b = None
    try:
        b = cli.create("--metadata", "batch=ls1", "--metadata", "n=b", "--cpus", "0.5")
        table = cli.ok("ls").splitlines()
        assert table[0].split() == ["ID", "TEMPLATE", "STATE", "CPUS", "MEMORY", "EXPIRES"]
        rows = {l.split()[0]: l.split() for l in table[1:]}
        assert rows[a][1:5] == ["base", "running", "1", "512M"]
        assert rows[b][1:5] == ["base", "running", "0.5", "512M"]
        assert re.fullmatch(r"1m[0-5]\ds|2m00s", rows[a][5]), rows[a]

        def ids(*args):
            return sorted(s["id"] for s in cli.json("ls", *args)["sandboxes"])

        assert ids() == sorted([a, b])
        assert ids("--metadata", "batch=ls1") == sorted([a, b])
        assert ids("--metadata", "batch=ls1", "--metadata", "n=b") == [b]
        assert ids("--metadata", "batch=other") == []
        assert ids("--state", "running") == sorted([a, b])
        assert ids("--state", "paused,running") == sorted([a, b])
        assert ids("--state", "stopped,error") == []
        assert ids("--state", "paused", "--metadata", "n=a") == []
        assert cli.ok("ls", "--metadata", "n=zzz").splitlines()[1:] == []

        assert cli.ok("rm", b) == b + "\n"
        removed, b = b, None
        assert ids("--metadata", "batch=ls1") == [a]
        assert removed not in cli.ok("ls")
    finally:
        cli.rm(*[x for x in (a, b) if x])

    for args in (["--metadata", "novalue"], ["--bogus"], ["stray"], ["-o"]):
        r = cli("ls", *args)
        assert r.returncode == 2, (args, r)
        one_error_line(r, "ls")


def test_timeout_moves_the_deadline(cli, sid):
    before = ts(cli.json("info", sid)["expires_at"])  # created with 120 s
    out = cli.ok("timeout", sid, "1000")
    m = re.fullmatch(r"%s expires at (\S+)\n" % re.escape(sid), out)
    assert m, out
    later = ts(m.group(1))
    assert later == ts(cli.json("info", sid)["expires_at"])
    assert 870 <= (later - before).total_seconds() <= 890
    # Shorter works as well, with -o json.
    j = cli.json("timeout", sid, "30")
    assert j["id"] == sid and (ts(j["expires_at"]) - later).total_seconds() < -900
    assert ts(cli.json("info", sid)["expires_at"]) == ts(j["expires_at"])

    for args in ([sid], [sid, "0"], [sid, "soon"], [sid, "10", "11"], ["bad/id", "10"]):
        r = cli("timeout", *args)
        assert r.returncode == 2, (args, r)
        one_error_line(r, "timeout")


def test_rm_goes_on_past_failures(cli):
    a, b = cli.create(), cli.create()
    try:
        r = cli("rm", a, "no-such-sandbox", b)
        assert r.returncode == 1
        assert r.stdout.decode() == "%s\n%s\n" % (a, b)
        assert "no-such-sandbox" in one_error_line(r, "rm")
        for s in (a, b):
            r = cli("info", s)
            assert r.returncode == 1 and "not_found" in one_error_line(r, "info")
    finally:
        cli.rm(a, b)
    r = cli("rm")
    assert r.returncode == 2
    one_error_line(r, "rm")


# ---- exec ------------------------------------------------------------------------------------------


def test_exec_output_status_and_options(cli, sid):
    r = cli("exec", sid, "--", "sh", "-c", "printf out1; printf err1 >&2; printf out2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out1out2", b"err1")

    # Output bytes pass through exactly (no newline added, binary kept).
    r = cli("exec", sid, "--", "printf", r"\000\377\r\n\001")
    assert (r.returncode, r.stdout) == (0, b"\x00\xff\r\n\x01")

    r = cli("exec", sid, "--", "sh", "-c", "kill -TERM $$")
    assert (r.returncode, r.stderr) == (128 + 15, b"")
    r = cli("exec", sid, "--", "sh", "-c", "kill -KILL $$")
    assert r.returncode == 128 + 9

    r = cli("exec", sid, "--env", "X=one two", "--env", "Y=2", "--cwd", "/tmp", "--user",
            "nobody", "--", "sh", "-c", 'echo "$X|$Y|$(pwd)|$(id -u)"')
    assert (r.returncode, r.stdout) == (0, b"one two|2|/tmp|65534\n"), r.stderr
    # The id may also come after the options; no `--` needed when CMD has no options.
    assert cli.ok("exec", "--user", "1000", sid, "id", "-u") == "1000\n"

    t0 = time.monotonic()
    r = cli("exec", sid, "--timeout", "1", "--", "sh", "-c", "echo started; sleep 30")
    assert r.returncode == 124 and r.stdout == b"started\n"
    assert "timed out" in one_error_line(r, "exec")
    assert time.monotonic() - t0 < 10

    # The API refuses a command it cannot start: warren's own failure, 125 (one line).
    r = cli("exec", sid, "--", "/no/such/command")
    assert r.returncode == 125 and "/no/such/command" in one_error_line(r, "exec")
    r = cli("exec", sid, "--", "sh", "-c", "/no/such/command")
    assert r.returncode == 127
    r = cli("exec", sid, "--cwd", "/no/such/dir", "--", "true")
    assert r.returncode != 0

    for args in ([sid], [], [sid, "--bogus", "--", "true"], [sid, "--env", "X", "--", "true"],
                 [sid, "--timeout", "x", "--", "true"], ["bad/id", "--", "true"]):
        r = cli("exec", *args)
        assert r.returncode == 2, (args, r)
        one_error_line(r, "exec")


def test_exec_stdin(cli, sid, tmp_path):
    # A pipe with a few MB of binary data (streamed: background + attach + chunked stdin),
    # stored in the sandbox and read back byte for byte.
    data = os.urandom(4 << 20)
    r = cli("exec", sid, "--", "sh", "-c", "cat > /tmp/stdin.bin; exit 7", input=data)
    assert (r.returncode, r.stdout, r.stderr) == (7, b"", b"")
    r = cli("cp", sid + ":/tmp/stdin.bin", "-")
    assert r.returncode == 0 and len(r.stdout) == len(data) and r.stdout == data
    r = cli("exec", sid, "--", "sha256sum", input=data)
    assert r.returncode == 0 and r.stdout.decode().split()[0] == sha(data)
    # Echoed back while it is still being sent (less than the agent's windows: see below).
    small = os.urandom(200_000)
    r = cli("exec", sid, "--", "cat", input=small)
    assert r.returncode == 0 and r.stdout == small

    # A small regular file rides in the request; a large one is streamed.
    for size in (1000, (1 << 20) + 5):
        f = tmp_path / ("in%d" % size)
        f.write_bytes(os.urandom(size))
        with open(f, "rb") as fh:
            r = cli("exec", sid, "--", "sha256sum", stdin=fh)
        assert r.returncode == 0 and r.stdout.decode().split()[0] == sha(f.read_bytes())

    # /dev/null and -n give EOF at once.
    assert cli.ok("exec", sid, "--", "wc", "-c").strip() == "0"
    assert cli.ok("exec", "-n", sid, "--", "wc", "-c", input=b"ignored").strip() == "0"


def test_exec_stdin_echo_large(cli, sid):
    # Regression: warren-init used to stop reading its connection while a process's stdin queue
    # was full, which also stopped the acks of the process's output: echoing a large stdin
    # deadlocked. Stdin now has its own window (STDIN_ACK).
    data = os.urandom(8 << 20)
    r = cli("exec", sid, "--", "cat", input=data, timeout=60)
    assert r.returncode == 0 and len(r.stdout) == len(data) and r.stdout == data


@pytest.mark.parametrize("stdin", ["null", "pipe"])
def test_exec_forwards_signals(cli, sid, stdin):
    script = 'trap "echo got-term; exit 3" TERM; echo ready; while :; do sleep 0.1; done'
    p = subprocess.Popen([WARREN, "exec", sid, "--", "sh", "-c", script], env=cli.environ(),
                         stdin=subprocess.DEVNULL if stdin == "null" else subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=10)
        # (The signal goes to the command's process group: sh may report its `sleep` killed.)
        assert (p.returncode, out) == (3, b"got-term\n") and b"warren" not in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_exec_tty(cli, sid):
    rc, out = cli.pty("exec", "-t", sid, "--", "sh", "-c", "tty; stty size; echo $TERM; exit 5",
                      size=(33, 101), env={"TERM": "xterm-test"})
    assert rc == 5, out
    # The command's terminal: a pty, sized like ours, with our TERM; output ends in CRLF.
    assert re.search(rb"^/dev/pts/\d+\r$", out, re.M), out
    assert b"\r\n33 101\r\n" in out and b"\r\nxterm-test\r\n" in out, out
    # No local terminal: a pty all the same, 80x24.
    r = cli("exec", "-t", sid, "--", "sh", "-c", "tty; stty size", input=b"")
    assert r.returncode == 0 and re.fullmatch(rb"/dev/pts/\d+\r\n24 80\r\n", r.stdout), r

    # A terminal without -t forwards nothing and gives no tty.
    rc, out = cli.pty("exec", sid, "--", "sh", "-c", "tty; cat; echo done")
    assert rc == 0 and b"not a tty" in out and b"done" in out, out


# ---- shell -----------------------------------------------------------------------------------------


def test_shell(cli, sid):
    rc, out = cli.pty("shell", sid, send=b"echo hi-from-shell; exit\n")
    assert rc == 0, out
    # The command's own output line, not just the echo of what was typed.
    assert re.search(rb"(^|\n)hi-from-shell\r?\n", out), out

    rc, out = cli.pty("shell", sid, "--user", "1000", "--cwd", "/tmp",
                      send=b"echo \"[$(id -u) $(pwd)]\"; exit 3\n")
    assert rc == 3 and b"[1000 /tmp]" in out, out

    for args in ([sid, "ls"], [sid, "-t"], []):
        r = cli("shell", *args)
        assert r.returncode == 2, (args, r)
        one_error_line(r, "shell")


# ---- cp --------------------------------------------------------------------------------------------


def test_cp_both_ways(cli, sid, tmp_path):
    data = os.urandom(5 << 20)
    src = tmp_path / "payload.bin"
    src.write_bytes(data)
    os.chmod(src, 0o640)

    # Into an existing directory the file keeps its name (and its permission bits).
    r = cli("cp", str(src), sid + ":/tmp/")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    out = cli.ok("exec", sid, "--", "sh", "-c", "sha256sum /tmp/payload.bin; stat -c %a "
                 "/tmp/payload.bin")
    assert out.split() == [sha(data), "/tmp/payload.bin", "640"]

    # To a new name, and back, into a directory and to a file.
    cli.ok("cp", str(src), sid + ":/tmp/renamed.bin")
    down = tmp_path / "down"
    down.mkdir()
    cli.ok("cp", sid + ":/tmp/renamed.bin", str(down))
    assert sha((down / "renamed.bin").read_bytes()) == sha(data)
    cli.ok("cp", sid + ":/tmp/payload.bin", str(down / "copy.bin"))
    assert (down / "copy.bin").read_bytes() == data
    assert sorted(os.listdir(down)) == ["copy.bin", "renamed.bin"]  # no temporary left

    # `-` is stdin and stdout.
    piped = os.urandom(200_000)
    r = cli("cp", "-", sid + ":/tmp/piped", input=piped)
    assert r.returncode == 0, r.stderr
    r = cli("cp", sid + ":/tmp/piped", "-")
    assert r.returncode == 0 and r.stdout == piped
    r = cli("cp", sid + ":/tmp/payload.bin", "-")
    assert r.returncode == 0 and sha(r.stdout) == sha(data)

    # Directories are refused both ways; a missing file fails and leaves nothing.
    r = cli("cp", str(down), sid + ":/tmp/d")
    assert r.returncode == 1 and "director" in one_error_line(r, "cp")
    r = cli("cp", sid + ":/tmp", str(down / "x"))
    assert r.returncode == 1 and "director" in one_error_line(r, "cp")
    r = cli("cp", sid + ":/tmp/missing", str(down / "missing"))
    assert r.returncode == 1
    one_error_line(r, "cp")
    r = cli("cp", str(src), sid + ":/no/such/dir/")
    assert r.returncode == 1
    one_error_line(r, "cp")
    assert sorted(os.listdir(down)) == ["copy.bin", "renamed.bin"]

    for args in ([str(src)], [str(src), str(down)], [sid + ":/a", sid + ":/b"],
                 [str(src), sid + ":relative"], ["--bogus", str(src), sid + ":/tmp/"]):
        r = cli("cp", *args)
        assert r.returncode == 2, (args, r)
        one_error_line(r, "cp")


# ---- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["frobnicate"],
    ["ls", "--bogus"],
    ["ls", "-x"],
    ["info", "sb-1", "--bogus"],
    ["info"],
    ["info", "a", "b"],
    ["info", "not/an/id"],
    ["create", "--cpus"],
    ["timeout", "sb-1"],
    ["rm", "--force", "sb-1"],
    ["config", "show", "--bogus"],
    ["login", "--bogus"],
    ["cp", "--bogus", "a", "b"],
    ["exec", "sb-1", "--bogus", "true"],
    ["shell", "sb-1", "--bogus"],
])
def test_usage_errors(cli, args):
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == b"", r
    one_error_line(r)


def test_no_arguments_prints_usage(cli):
    r = cli()
    assert r.returncode == 2 and b"usage: warren" in r.stderr
    r = cli("--help")
    assert r.returncode == 0 and b"exec" in r.stdout and b"cp" in r.stdout


def test_unknown_sandbox(cli):
    for args in (["info", "nosuchsb"], ["rm", "nosuchsb"], ["timeout", "nosuchsb", "10"],
                 ["cp", "nosuchsb:/etc/passwd", "-"], ["cp", "-", "nosuchsb:/tmp/x"]):
        r = cli(*args, input=b"x")
        assert r.returncode == 1 and r.stdout == b"", (args, r)
        assert "not found" in one_error_line(r, args[0]) or "not_found" in r.stderr.decode()
    # exec and shell keep 1..124 for the command: warren's own failures are 125.
    r = cli("exec", "nosuchsb", "--", "true")
    assert r.returncode == 125 and "not_found" in one_error_line(r, "exec")
    r = cli("exec", "nosuchsb", "--", "cat", input=b"streamed")
    assert r.returncode == 125 and "not_found" in one_error_line(r, "exec")


def test_wrong_key_over_tcp(cli, daemon):
    env = {"WARREN_API_URL": daemon.tcp_url, "WARREN_API_KEY": "wr_" + "1" * 64}
    for args in (["ls"], ["create"], ["info", "sb-1"]):
        r = cli(*args, env=env)
        assert r.returncode == 1 and r.stdout == b"", (args, r)
        assert "unauthorized" in one_error_line(r, args[0])
    r = cli("ls", env={"WARREN_API_URL": daemon.tcp_url, "WARREN_API_KEY": None})
    assert r.returncode == 1 and "unauthorized" in one_error_line(r, "ls")
    r = cli("exec", "sb-1", "--", "true", env=env)
    assert r.returncode == 125 and "unauthorized" in one_error_line(r, "exec")
    # The right key works.
    r = cli("ls", env=dict(env, WARREN_API_KEY=daemon.admin_key))
    assert r.returncode == 0, r.stderr


class FakeWarrend:
    """A loopback HTTP server that records requests and answers from a table of canned
    responses, to check what warren sends and how it takes answers warrend rarely gives."""

    def __init__(self, routes):
        import http.server
        import threading
        fake = self
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                fake.requests.append((self.command, self.path, dict(self.headers)))
                missing = json.dumps({"code": "not_found", "message": "no route " + self.path})
                status, headers, body = routes.get(self.path, (404, {}, missing.encode()))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_headers_pagination_and_odd_answers(cli):
    def sb(i):
        return {"id": "sb-%d" % i, "template": "base", "state": "running", "cpus": 1,
                "memory_mb": 2048, "created_at": "2020-01-01T00:00:00Z",
                "expires_at": "2020-01-01T00:05:00Z", "metadata": {}}

    js = {"Content-Type": "application/json"}
    fake = FakeWarrend({
        "/v1/sandboxes?limit=1000": (200, js, json.dumps(
            {"sandboxes": [sb(1), sb(2)], "next_cursor": "c+2="}).encode()),
        "/v1/sandboxes?limit=1000&cursor=c%2B2%3D": (200, js, json.dumps(
            {"sandboxes": [sb(3)], "next_cursor": None}).encode()),
        "/v1/sandboxes/sb-500": (500, {"Content-Type": "text/plain"}, b"boom\nsecond line"),
        "/v1/sandboxes/sb-503": (503, dict(js, **{"Retry-After": "7"}),
                                 b'{"code": "busy", "message": "try later"}'),
        "/v1/sandboxes/sb-bad": (200, js, b"{not json"),
    })
    try:
        env = {"WARREN_API_URL": fake.url, "WARREN_API_KEY": "wk_secret", "WARREN_REQUEST_ID":
               "req-cli-1"}
        j = cli.json("ls", env=env)
        assert [s["id"] for s in j["sandboxes"]] == ["sb-1", "sb-2", "sb-3"]  # pages merged
        for method, path, headers in fake.requests:
            assert headers.get("Authorization") == "Bearer wk_secret", headers
            assert headers.get("X-Request-Id") == "req-cli-1", headers
        table = cli.ok("ls", env=env).splitlines()
        assert [l.split()[0] for l in table] == ["ID", "sb-1", "sb-2", "sb-3"]
        assert table[1].split()[3:] == ["1", "2G", "expired"]

        r = cli("info", "sb-500", env=env)
        assert r.returncode == 1 and "HTTP 500: boom" in one_error_line(r, "info")
        r = cli("info", "sb-503", env=env)
        assert r.returncode == 1
        assert one_error_line(r) == "warren: info: try later (busy); retry in 7 s\n"
        r = cli("info", "sb-bad", env=env)
        assert r.returncode == 1
        one_error_line(r, "info")
    finally:
        fake.close()


def test_unreachable_endpoint(cli, tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    for url in ("http://127.0.0.1:%d" % port, "unix://%s/absent.sock" % tmp_path):
        for args in (["ls"], ["info", "sb-1"], ["exec", "sb-1", "--", "true"]):
            r = cli(*args, env={"WARREN_API_URL": url})
            assert r.returncode != 0 and r.stdout == b"", (url, args, r)
            assert r.returncode == (125 if args[0] == "exec" else 1)
            err = one_error_line(r, args[0])
            assert "connect" in err or "warrend" in err, err
    for url in ("https://127.0.0.1:7860", "ftp://x", "garbage"):
        r = cli("ls", env={"WARREN_API_URL": url})
        assert r.returncode != 0
        one_error_line(r, "ls")
