# shellcheck shell=sh
# Template `code-interpreter-v1` (the default of @e2b/code-interpreter): the base plus Debian's
# Jupyter kernel for Python and the usual data stack, and warren-interp (src/interp/), the
# project's own server of E2B's code-interpreter wire (/execute, /contexts, /health) on
# 127.0.0.1:49999 inside the sandbox, started with the sandbox by the template's start command.
# See docs/code-interpreter.md.
# stamp: src/interp

PROFILE_PACKAGES=python3-ipykernel,python3-jupyter-client,python3-numpy,python3-pandas,python3-matplotlib,python3-pil,python3-pexpect

profile_customize() {
    r=$1
    install -D -m 0755 "$WB_SRC/src/interp/warren-interp" "$r/usr/lib/warren/warren-interp"
    # matplotlib builds its font list on first import (seconds): once here, for `user`, so a
    # sandbox's first plot does not pay for it.
    chroot --userspec=1000:1000 "$r" /usr/bin/env HOME=/home/user MPLBACKEND=Agg \
        python3 -c 'import matplotlib.pyplot' >/dev/null 2>&1 || true
}

PROFILE_CHECKS='python3 -c "import ipykernel, jupyter_client, numpy, pandas, matplotlib, PIL, pexpect"
test -r /usr/share/jupyter/kernels/python3/kernel.json
/usr/lib/warren/warren-interp --check'

profile_config() {
    printf '{"user": "user", "cwd": "/home/user", "setuid": true, "env": {"PATH": "%s", "LANG": "C.UTF-8"}, ' "$PATH_ENV"
    printf '"start": {"cmd": "/usr/lib/warren/warren-interp --port 49999", "ready": {"port": 49999, "path": "/health"}}}\n'
}
