#!/usr/bin/env python3
"""Desktop benchmark: a sandbox of the `desktop` template, its desktop started through the native
API, then the round trip of a screenshot (GET .../desktop/screenshot, over the unix socket and
over TCP with a key), of a pointer move and of a cursor read, against scrot alone inside the
sandbox (the tool's own cost). Prints medians and 90th percentiles in ms.

The @e2b/desktop round trip (scrot to a file, files.read, files.remove: three envd calls) is
printed by tests/compat/desktop.test.mjs.

Usage: bench/desktop.py BUILD_DIR [ROUNDS]   (root; see docs/benchmarks.md)"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sdk", "python"))
import warren  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
TEMPLATES = os.environ.get("WARREN_TEST_TEMPLATES", "/var/cache/warren/test-templates")


def stats(name, xs):
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(len(xs) * 0.9))]
    print("%-44s median %7.1f ms   p90 %7.1f ms   (n=%d)" % (name, statistics.median(xs), p90, len(xs)))


def timed(fn, n=ROUNDS):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main():
    top = tempfile.mkdtemp(prefix="warren-bench-desktop-")
    state = os.path.join(top, "state")
    for name in ("base", "desktop"):
        d = os.path.join(state, "templates", name)
        os.makedirs(d)
        os.symlink(os.path.join(TEMPLATES, name, "rootfs"), os.path.join(d, "rootfs"))
        shutil.copy(os.path.join(TEMPLATES, name, "config.json"), d)
    sock = os.path.join(top, "w.sock")
    run = "/run/warren-bench-%d" % os.getpid()
    table = "wbd%d" % os.getpid()
    env = dict(os.environ, WARREN_CGROUP_PARENT="warren-bench-%d" % os.getpid(),
               WARREN_UID_BASE=str(0x70000000), WARREN_UID_SLOTS="64")
    proc = subprocess.Popen(
        [os.path.join(BUILD, "warrend"), "--state-dir", state, "--socket", sock,
         "--listen", "127.0.0.1:0", "--run-dir", run, "--log-level", "warn",
         # THE NETWORK RULE: no internet for the browser's sandbox; no network slots made ahead,
         # a pool and nftables table of the benchmark's own (removed at the end).
         "--net-default", "off", "--net-ready", "0", "--net-pool", "10.%d.%d.0/24" % (
             200 + os.getpid() % 40, os.getpid() % 250), "--net-table", table],
        stdout=subprocess.PIPE, env=env)
    line = proc.stdout.readline().decode()
    assert "ready" in line, line
    port = int(line.split("tcp=127.0.0.1:")[1].split()[0])
    try:
        c = warren.Client("unix://" + sock)
        with open(os.path.join(state, "admin.key")) as f:
            key = f.read().strip()
        t = time.perf_counter()
        sb = warren.Sandbox.create(client=c, template="desktop", timeout=600)
        print("%-44s %7.1f ms" % ("create (desktop template)", (time.perf_counter() - t) * 1000))
        t = time.perf_counter()
        sb.desktop.start()
        print("%-44s %7.1f ms" % ("desktop/start (Xvfb + XFCE ready)", (time.perf_counter() - t) * 1000))
        time.sleep(2)  # let the session settle (xfdesktop draws its background)
        for _ in range(5):  # warm-up: the first screenshots of a session are slower
            png = sb.desktop.screenshot()
        print("screenshot: %d bytes, 1024x768" % len(png))
        stats("screenshot, native API (unix socket)", timed(sb.desktop.screenshot))
        tcp = warren.Sandbox.connect(sb.id, client=warren.Client("http://127.0.0.1:%d" % port, key))
        stats("screenshot, native API (TCP + key)", timed(tcp.desktop.screenshot))
        stats("screenshot with cursor, native API", timed(lambda: sb.desktop.screenshot(cursor=True)))
        i = [0]

        def move():
            i[0] += 1
            sb.desktop.move(100 + i[0] % 500, 200)
        stats("mouse move (xdotool --sync), native API", timed(move))
        stats("cursor read, native API", timed(sb.desktop.cursor))
        stats("exec `true` (the process round trip alone)", timed(lambda: sb.commands.run("true")))
        # scrot alone, in the sandbox (python3 times it there).
        r = sb.commands.run(
            "python3 -c 'import subprocess,time\nfor _ in range(%d):\n"
            " t=time.perf_counter(); subprocess.run([\"scrot\",\"-o\",\"/tmp/b.png\"],check=True);"
            " print((time.perf_counter()-t)*1000)'" % ROUNDS)
        stats("scrot alone, inside the sandbox", [float(x) for x in r.stdout.split()])
        sb.kill()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(top, ignore_errors=True)
        slots = os.path.join(run, "net", table)
        for e in os.listdir(slots) if os.path.isdir(slots) else []:
            subprocess.run(["umount", "-l", os.path.join(slots, e)], stderr=subprocess.DEVNULL)
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run(["nft", "delete", "table", "inet", table], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10  # a killed sandbox's cgroup goes away asynchronously
        for hier in os.listdir("/sys/fs/cgroup"):
            p = os.path.join("/sys/fs/cgroup", hier, env["WARREN_CGROUP_PARENT"])
            while os.path.isdir(p) and time.monotonic() < deadline:
                try:
                    os.rmdir(p)
                except OSError:
                    time.sleep(0.05)


if __name__ == "__main__":
    main()
