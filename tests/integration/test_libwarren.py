"""libwarren (include/warren.h) as a program outside the tree uses it: C programs compiled with
`pkg-config --cflags --libs warren` (PKG_CONFIG_PATH=build) against build/libwarren.so, run
against a real warrend. tests/integration/libwarren_client.c drives every call and prints one
fact a line; docs/examples/warren-example.c, the documented example, is built and run too so it
cannot rot."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, ENV, SANITIZED

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CC = os.environ.get("CC", "cc")
FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
         "-Wno-missing-field-initializers", "-Werror"]
# Under `make asan` the library is instrumented, and so must be the programs that load it (the
# ASan runtime comes first); LIBWARREN_TEST_SANITIZE=1 does the same on a plain build, which
# finds leaks and overflows of the library's (LeakSanitizer watches every malloc).
if SANITIZED or os.environ.get("LIBWARREN_TEST_SANITIZE") == "1":
    SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]
else:
    SAN_FLAGS = []
FLAGS += SAN_FLAGS


def pkg_config(*args):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.abspath(BUILD))
    r = subprocess.run(["pkg-config", *args, "warren"], capture_output=True, env=env, check=True)
    return r.stdout.decode().split()


def compile_c(src, out, *extra, static=False):
    libs = pkg_config("--libs")
    if static:
        # libwarren.a, and the shared libraries it needs (pkg-config --static).
        libs = ["-Wl,-Bstatic", "-lwarren", "-Wl,-Bdynamic"] + \
            [f for f in pkg_config("--static", "--libs") if f != "-lwarren"]
    cmd = [CC, *FLAGS, *extra, "-o", out, src, *pkg_config("--cflags"), *libs]
    if not static:
        cmd.append("-Wl,-rpath," + os.path.abspath(BUILD))
    r = subprocess.run(cmd, capture_output=True)
    assert r.returncode == 0, (cmd, r.stderr.decode())
    return out


@pytest.fixture(scope="module")
def client_bin(tmp_path_factory):
    return compile_c(os.path.join(HERE, "libwarren_client.c"),
                     str(tmp_path_factory.mktemp("lw") / "libwarren_client"))


def facts(out):
    """The program's "name value" lines as {name: [value, ...]}."""
    got = {}
    for line in out.decode().splitlines():
        name, _, value = line.partition(" ")
        got.setdefault(name, []).append(value)
    return got


def run_client(binary, scenario, url, key, timeout=240):
    r = subprocess.run([binary, scenario, url, key], capture_output=True, timeout=timeout,
                       env=ENV)
    f = facts(r.stdout)
    assert r.returncode == 0 and not any(k.startswith("FAILED") for k in f), \
        (r.returncode, r.stdout.decode(), r.stderr.decode())
    return f


def test_pkg_config_and_the_libraries():
    assert pkg_config("--modversion") == ["0.1.0"]
    assert "-I" + os.path.join(ROOT, "include") in pkg_config("--cflags")
    assert "jansson" in " ".join(pkg_config("--static", "--libs"))
    so = os.path.join(BUILD, "libwarren.so")
    soname = subprocess.run(["objdump", "-p", so], capture_output=True, check=True).stdout.decode()
    assert re.search(r"SONAME\s+libwarren\.so\.0\b", soname), soname
    assert os.path.realpath(so) == os.path.realpath(os.path.join(BUILD, "libwarren.so.0"))
    # Only the API is exported: not util/'s wr_*, not the transport's wl_*, not llhttp.
    nm = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, check=True)
    syms = [l.split()[-1].split("@")[0] for l in nm.stdout.decode().splitlines() if l.strip()]
    exported = [s for s in syms if s != "WARREN_0"]
    assert exported and all(s.startswith("warren_") for s in exported), exported
    for want in ("warren_connect", "warren_create", "warren_exec", "warren_file_write",
                 "warren_fork", "warren_snapshot_create", "warren_pause", "warren_resume"):
        assert want in exported
    # The static library too: its util/, transport and llhttp symbols are local, so they cannot
    # clash with a program's own (an xmalloc, say).
    nm = subprocess.run(["nm", "-g", "--defined-only", os.path.join(BUILD, "libwarren.a")],
                        capture_output=True, check=True)
    static = [l.split()[-1] for l in nm.stdout.decode().splitlines()
              if l.strip() and not l.endswith(":")]
    assert sorted(static) == sorted(exported), set(static) ^ set(exported)
    # Every function the header declares is in the library.
    with open(os.path.join(ROOT, "include", "warren.h")) as f:
        declared = set(re.findall(r"\bWARREN_API\b[^;]*?\b(warren_[a-z_]+)\(", f.read(), re.S))
    assert declared and declared <= set(exported), declared - set(exported)


def test_header_is_plain_c_and_cxx(tmp_path):
    src = tmp_path / "h.c"
    src.write_text("#include <warren.h>\nint main(void) { return warren_version()[0] != '0'; }\n")
    compile_c(str(src), str(tmp_path / "h"), "-pedantic")
    if shutil.which("g++"):
        cxx = tmp_path / "h.cc"
        cxx.write_text("#include <warren.h>\nint main() { warren_error e = {};"
                       " return warren_strcode(e.code)[0] != 'o'; }\n")
        r = subprocess.run(["g++", "-std=c++11", "-Wall", "-Werror", "-pedantic", *SAN_FLAGS, "-o",
                            str(tmp_path / "hxx"), str(cxx), *pkg_config("--cflags"),
                            *pkg_config("--libs"), "-Wl,-rpath," + os.path.abspath(BUILD)],
                           capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        assert subprocess.run([str(tmp_path / "hxx")]).returncode == 0


def test_lifecycle(daemon, client_bin):
    f = run_client(client_bin, "lifecycle", daemon.url, "")
    assert f["version"] == ["0.1.0"]
    assert f["endpoint"] == [daemon.url]
    sid, rest = f["created"][0].split(" ", 1)
    assert rest == "state=running template=base memory=256 meta=libwarren"
    assert f["json_has_id"] == ["1"]
    assert f["got"] == [sid + " running"]
    assert f["listed"] == ["1 first=" + sid]

    # exec: each stream in order, the other's output between, exit 3; on_start and on_exit.
    assert f["exec_log"] == ["o:one\\n|e:two\\n|o:three\\n"]
    assert f["exec_exit"] == ["3 signal=0 timed_out=0"]
    assert f["exec_pid"] == ["1"] and f["exec_on_exit"] == ["1"]
    assert f["stdin_data"] == ["o:ABC\\n exit=0"]
    assert f["stdin_stream"] == ["streamed input\\n"]
    assert f["stdin_exit"] == ["0"]
    assert f["killed"] == ["exit=-1 signal=15"]
    assert f["timeout"] == ["timed_out=1"]
    assert f["env_cwd"] == ["o:bar baz /tmp\\n"]
    assert f["stopped"] == ["r=-1 code=internal"]

    # files
    assert f["read_stream"] == ["line 1\\nline 2\\nline 3\\n"]
    assert f["read_buf"] == ["11 hello file\\n"]
    assert f["stat"] == ["name=a.txt path=/tmp/lw/a.txt type=0 size=11 mode=600"]
    assert sorted(f["list"]) == ["/tmp/lw/a.txt type=0", "/tmp/lw/sub type=1",
                                 "/tmp/lw/sub/b.txt type=0"]
    # an abandoned write leaves the file as it was, and the handle goes on working
    assert f["abandoned"] == ["r=-1 code=internal"]
    assert f["after_abandon"] == ["hello file\\n"]
    assert f["stat_removed"][0].startswith("code=not_found api_code=not_found status=404")
    assert f["remove_nonempty"][0].startswith("code=conflict api_code=conflict status=409"), \
        f["remove_nonempty"]
    assert f["relative_path"][0].startswith("code=invalid api_code=- status=0")

    # pause, resume, snapshot, fork
    assert f["paused"] == ["paused"]
    assert f["exec_paused"][0].startswith("code=conflict api_code=conflict status=409")
    assert f["resumed"] == ["running"]
    assert f["snapshot"] == ["id name=lw-snap"]
    assert f["from_snapshot"] == ["kept\\n"]
    assert f["forked"] == ["2 errors=0"]
    assert f["fork_file"] == ["kept\\n", "kept\\n"]

    # errors: the API's code, its status and message
    assert f["deleted"] == [sid]
    for name in ("get_deleted", "delete_unknown", "exec_unknown"):
        assert f[name][0].startswith("code=not_found api_code=not_found status=404 errno=0 "
                                     "message="), (name, f[name])
    assert "no-such-sandbox" in f["delete_unknown"][0]
    assert f["create_unknown_template"][0].startswith("code=not_found api_code=not_found "
                                                      "status=404")


def test_keys_over_tcp(daemon, client_bin):
    f = run_client(client_bin, "auth", daemon.tcp_url, "wrk_not-a-real-key")
    assert f["list"][0].startswith("code=unauthorized api_code=unauthorized status=401 "), f
    f = run_client(client_bin, "auth", daemon.tcp_url, daemon.admin_key)
    assert f["endpoint"] == [daemon.tcp_url]
    assert f["list"] == ["0"]


def test_connect_failure(client_bin, tmp_path):
    r = subprocess.run([client_bin, "auth", str(tmp_path / "none.sock"), ""], capture_output=True)
    f = facts(r.stdout)
    assert r.returncode == 1
    assert f["connect"][0].startswith("code=system api_code=- status=0 errno=2 message=connect "
                                      "to warrend at unix://" + str(tmp_path)), f


def run_example(binary, daemon):
    env = {k: v for k, v in ENV.items() if k not in ("WARREN_API_KEY", "XDG_CONFIG_HOME")}
    env.update(WARREN_API_URL=daemon.url, HOME="/nonexistent")
    return subprocess.run([binary], capture_output=True, timeout=120, env=env)


def test_example_program(daemon, tmp_path):
    exe = compile_c(os.path.join(ROOT, "docs", "examples", "warren-example.c"),
                    str(tmp_path / "warren-example"), "-pedantic")
    r = run_example(exe, daemon)
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = r.stdout.decode().splitlines()
    assert re.fullmatch(r"sandbox \S+ \(running\)", out[0]), out
    sid = out[0].split()[1]
    assert out[1:] == ["hello from libwarren", "exit code 7",
                       "read back 26 bytes: written by warren-example", "deleted " + sid]
    assert r.stderr == b"to stderr\n"


def test_example_links_statically(daemon, tmp_path):
    exe = compile_c(os.path.join(ROOT, "docs", "examples", "warren-example.c"),
                    str(tmp_path / "warren-example-static"), static=True)
    ldd = subprocess.run(["ldd", exe], capture_output=True).stdout.decode()
    assert "libwarren" not in ldd, ldd
    r = run_example(exe, daemon)
    assert r.returncode == 0 and b"deleted " in r.stdout, (r.stdout, r.stderr)


def test_static_library_keeps_its_insides_to_itself(tmp_path):
    # A program with functions named as libwarren's insides (util/'s xmalloc and wr_err_set)
    # links against libwarren.a and keeps its own.
    src = tmp_path / "clash.c"
    src.write_text(
        "#include <stddef.h>\n#include <warren.h>\n"
        "void *xmalloc(size_t n) { (void)n; return (void *)0; }\n"
        "int wr_err_set(void) { return 42; }\n"
        "int main(void) { warren *w; warren_error e;\n"
        "  int r = warren_connect(\"/nonexistent/x.sock\", \"\", &w, &e);\n"
        "  return r == -1 && e.code == WARREN_ESYS && xmalloc(1) == (void *)0 &&\n"
        "         wr_err_set() == 42 ? 0 : 1; }\n")
    exe = compile_c(str(src), str(tmp_path / "clash"), "-Wno-missing-prototypes", static=True)
    assert subprocess.run([exe]).returncode == 0
