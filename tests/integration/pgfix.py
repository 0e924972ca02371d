"""A throwaway PostgreSQL server for the tests (the multi-host gateway's database): a cluster made
by initdb in a temporary directory, run as the `postgres` user (the server refuses root),
listening only on a unix socket in that directory (no TCP port at all), fsync off, with a
database `warren`. stop() ends it (pg_ctl -m immediate) and removes the directory.

    pg = Postgres().start()
    pg.dsn                    # "host=/tmp/warren-pg-XXXX port=5432 dbname=warren user=postgres"
    pg.psql("select 1")       # "1"
    pg.stop()

Debian's postgresql package (scripts/deps.sh test) provides /usr/lib/postgresql/V/bin.
"""
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time

USER = "postgres"
PORT = 5432  # only names the socket file (.s.PGSQL.5432) in our own directory: no TCP listener


def bindir():
    """The newest installed server's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


def available():
    """Why the server cannot run here, or None when it can."""
    if bindir() is None:
        return "PostgreSQL is not installed (scripts/deps.sh test installs postgresql)"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return "there is no %s user (Debian's postgresql package makes it)" % USER
    return None


class Postgres:
    def __init__(self, dbname="warren"):
        self.dbname = dbname
        self.dir = None
        self.bin = bindir()
        self.data = None
        self.started = False

    @property
    def socket_dir(self):
        return self.dir

    @property
    def dsn(self):
        """A libpq connection string (key=value form)."""
        return "host=%s port=%d dbname=%s user=%s" % (self.dir, PORT, self.dbname, USER)

    @property
    def url(self):
        """The same as a postgresql:// URI (the socket directory percent-encoded as host)."""
        return "postgresql://%s@%%2F%s:%d/%s" % (USER, self.dir.strip("/").replace("/", "%2F"), PORT,
                                                 self.dbname)

    def _as_pg(self, *cmd, check=True, timeout=60):
        r = subprocess.run(["runuser", "-u", USER, "--", *cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout, cwd=self.dir)
        if check and r.returncode != 0:
            raise AssertionError("%s failed (exit %d): %s%s" % (" ".join(cmd), r.returncode, r.stdout,
                                                               r.stderr))
        return r

    def start(self):
        why = available()
        if why:
            raise AssertionError(why)
        self.dir = tempfile.mkdtemp(prefix="warren-pg-")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self):
        pw = pwd.getpwnam(USER)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o711)  # the socket reachable by any local user (the data dir stays 0700)
        self.data = os.path.join(self.dir, "data")
        self._as_pg(os.path.join(self.bin, "initdb"), "-D", self.data, "-U", USER, "-A", "trust",
                    "-E", "UTF8", "--locale=C", "--no-sync")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n# warren tests (tests/integration/pgfix.py)\n"
                    "listen_addresses = ''\n"
                    "unix_socket_directories = '%s'\n"
                    "port = %d\n"
                    "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                    "max_connections = 100\nshared_buffers = 32MB\n"
                    "log_min_messages = warning\n" % (self.dir, PORT))
        log = os.path.join(self.dir, "server.log")
        r = self._as_pg(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", log, "-w", "-t", "30",
                        "start", check=False)
        self.started = True  # pg_ctl may have started it even when it reports a failure
        if r.returncode != 0:
            raise AssertionError("pg_ctl start failed (exit %d): %s%s\n%s" % (
                r.returncode, r.stdout, r.stderr, self.log_tail()))
        self.psql("CREATE DATABASE %s" % self.dbname, db="postgres")

    def log_tail(self, n=4000):
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return f.read()[-n:]
        except (OSError, TypeError):
            return ""

    def psql(self, sql, db=None):
        """Run SQL on the database (psql, unaligned, tuples only); its output, stripped."""
        psql = os.path.join(self.bin, "psql")
        if not os.path.exists(psql):
            psql = shutil.which("psql") or "psql"
        r = self._as_pg(psql, "-h", self.dir, "-p", str(PORT), "-d", db or self.dbname, "-X", "-A", "-t",
                        "-v", "ON_ERROR_STOP=1", "-c", sql)
        return r.stdout.strip()

    def pid(self):
        """The postmaster's pid (its postmaster.pid), or None."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError, TypeError):
            return None

    def stop(self):
        if self.started and self.data:
            pid = self.pid()
            self._as_pg(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "-t", "30",
                        "stop", check=False)
            if pid is not None:
                # pg_ctl -w returns once postmaster.pid is gone; make sure the process is too
                deadline = time.monotonic() + 10
                while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
                    time.sleep(0.02)
                if os.path.exists("/proc/%d" % pid):
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
            self.started = False
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
