// SPDX-License-Identifier: Apache-2.0
// The compat suite, run once per SDK (e2b 2.51.0, e2b 2.50.0, novita-sandbox 2.1.1): the SDK,
// unchanged, against a real warrend on the Debian `base` template.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { baseAvailable, Daemon, isClean } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// sdk: the module; prefix: 'E2B' or 'NOVITA' (environment variables); name: the test's name.
export function suite(name, sdk, prefix) {
  const { Sandbox, CommandExitError, NotFoundError } = sdk;
  const skip = baseAvailable() ? false : 'no base template (WARREN_BASE_TEMPLATE): run ./test.sh';
  // Under CI a missing template is a failure, as in tests/integration/test_base_template.py.
  if (skip && process.env.CI === 'true') throw new Error(skip);

  describe(name, { skip, concurrency: false }, () => {
    let d, keyA, keyB, sbx;
    const opts = () => ({ apiKey: keyA });

    before(async () => {
      d = await new Daemon(name).start();
      keyA = await d.key(`${name}-a`);
      keyB = await d.key(`${name}-b`);
      process.env[`${prefix}_API_URL`] = d.url;
      process.env[`${prefix}_SANDBOX_URL`] = d.url;
      process.env[`${prefix}_API_KEY`] = keyA;
      process.env[`${prefix}_DOMAIN`] = 'warren.test';
    });

    after(async () => {
      if (!d) return;
      const left = await d.stop();
      assert.ok(isClean(left), `left behind: ${JSON.stringify(left)}`);
      assert.equal(d.failure, undefined);
    });

    test('create with metadata, env and timeout; getInfo', async () => {
      sbx = await Sandbox.create('base', {
        ...opts(), metadata: { suite: name, role: 'main' }, envs: { FROM_CREATE: 'yes' },
        timeoutMs: 120_000,
      });
      assert.match(sbx.sandboxId, /^[a-z0-9]+$/);
      const info = await sbx.getInfo();
      assert.equal(info.sandboxId, sbx.sandboxId);
      assert.equal(info.templateId, 'base');
      assert.deepEqual(info.metadata, { suite: name, role: 'main' });
      assert.equal(info.state, 'running');
      const left = new Date(info.endAt) - Date.now();
      assert.ok(left > 100_000 && left <= 121_000, `endAt ${info.endAt}`);
      const r = await sbx.commands.run('echo $FROM_CREATE');
      assert.equal(r.stdout, 'yes\n');
      assert.equal(await sbx.isRunning(), true);
    });

    test('getMetrics: CPU and memory of the sandbox', async (t) => {
      if (typeof sbx.getMetrics !== 'function') {
        t.skip(`${name} has no getMetrics`);
        return;
      }
      await sbx.commands.run('i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done');
      const m = await sbx.getMetrics();
      assert.ok(m.length >= 1, `metrics: ${JSON.stringify(m)}`);
      const last = m[m.length - 1];
      assert.ok(last.memUsed > 0 && last.memTotal === 512 * 1024 * 1024, JSON.stringify(last));
      assert.ok(last.cpuCount >= 1 && last.cpuUsedPct > 0, JSON.stringify(last));
      assert.ok(last.timestamp instanceof Date || typeof last.timestamp === 'string');
    });

    test('commands.run: foreground, as user in a login bash, env, cwd, user', async () => {
      let out = '';
      const r = await sbx.commands.run('id -un; pwd; shopt -q login_shell && echo login; echo err >&2', {
        onStdout: (s) => { out += s; },
      });
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout, 'user\n/home/user\nlogin\n');
      assert.equal(r.stderr, 'err\n');
      assert.equal(out, r.stdout);
      assert.equal((await sbx.commands.run('echo $X-$Y', { envs: { X: '1', Y: 'two' } })).stdout,
        '1-two\n');
      assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
      const root = await sbx.commands.run('id -un; pwd', { user: 'root' });
      assert.equal(root.stdout, 'root\n/root\n');
    });

    test('commands.run: a failing command throws with its exit code', async () => {
      await assert.rejects(sbx.commands.run('echo out; exit 3'), (e) => {
        assert.ok(e instanceof CommandExitError, e);
        assert.equal(e.exitCode, 3);
        assert.equal(e.stdout, 'out\n');
        return true;
      });
    });

    test('commands.run in the background, then wait; list', async () => {
      const h = await sbx.commands.run('sleep 0.5; echo done', { background: true });
      assert.ok(h.pid > 0);
      const listed = await sbx.commands.list();
      assert.ok(listed.some((p) => p.pid === h.pid), JSON.stringify(listed));
      const r = await h.wait();
      assert.equal(r.stdout, 'done\n');
      assert.equal(r.exitCode, 0);
    });

    test('commands: stdin, then close it', async () => {
      const h = await sbx.commands.run('cat; echo end', { background: true, stdin: true });
      await sbx.commands.sendStdin(h.pid, 'abc\n');
      await sbx.commands.sendStdin(h.pid, 'def\n');
      if (sbx.commands.closeStdin) await sbx.commands.closeStdin(h.pid);
      else await sbx.commands.kill(h.pid);
      const r = await h.wait().catch((e) => e);
      assert.match(r.stdout, /^abc\ndef\n/);
    });

    test('commands: kill', async () => {
      const h = await sbx.commands.run('sleep 60', { background: true });
      assert.equal(await sbx.commands.kill(h.pid), true);
      await assert.rejects(h.wait(), (e) => e instanceof CommandExitError);
      assert.equal(await sbx.commands.kill(999999), false);
      const listed = await sbx.commands.list();
      assert.ok(!listed.some((p) => p.pid === h.pid));
    });

    test('pty: create, input, resize, kill', async () => {
      let out = '';
      const dec = new TextDecoder();
      const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (b) => { out += dec.decode(b); }, timeoutMs: 60_000 });
      await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size; echo mark-$((6*7))\n'));
      await until(() => out.includes('mark-42'), 'the pty output');
      assert.match(out, /24 80/);
      await sbx.pty.resize(t.pid, { cols: 100, rows: 30 });
      await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size\n'));
      await until(() => out.includes('30 100'), 'the resized terminal');
      assert.equal(await sbx.pty.kill(t.pid), true);
      await assert.rejects(t.wait(), (e) => e instanceof CommandExitError);
    });

    test('files: write, read, list, exists, rename, makeDir, remove', async () => {
      const w = await sbx.files.write('/home/user/dir/a.txt', 'hello');
      assert.equal(w.path, '/home/user/dir/a.txt');
      assert.equal(w.name, 'a.txt');
      assert.equal(await sbx.files.read('/home/user/dir/a.txt'), 'hello');
      const bytes = await sbx.files.read('/home/user/dir/a.txt', { format: 'bytes' });
      assert.deepEqual(Buffer.from(bytes), Buffer.from('hello'));
      const many = await sbx.files.write([
        { path: '/home/user/dir/b.txt', data: 'bee' },
        { path: 'rel/c.bin', data: new Uint8Array([0, 1, 2, 255]).buffer },
      ]);
      assert.deepEqual(many.map((e) => e.path), ['/home/user/dir/b.txt', '/home/user/rel/c.bin']);
      assert.deepEqual(Buffer.from(await sbx.files.read('/home/user/rel/c.bin', { format: 'bytes' })),
        Buffer.from([0, 1, 2, 255]));
      assert.equal(await sbx.files.read('/home/user/dir/empty', { format: 'text' }).catch(() => 'missing'), 'missing');
      await sbx.files.write('/home/user/dir/empty', '');
      assert.equal(await sbx.files.read('/home/user/dir/empty'), '');
      const ls = await sbx.files.list('/home/user/dir');
      assert.deepEqual(ls.map((e) => e.name).sort(), ['a.txt', 'b.txt', 'empty']);
      const a = ls.find((e) => e.name === 'a.txt');
      assert.equal(a.type, 'file');
      assert.equal(a.size, 5);
      assert.equal(a.owner, 'user');
      assert.equal((await sbx.commands.run('stat -c %U /home/user/dir/a.txt')).stdout, 'user\n');
      assert.equal(await sbx.files.exists('/home/user/dir/a.txt'), true);
      assert.equal(await sbx.files.exists('/home/user/dir/nope'), false);
      const moved = await sbx.files.rename('/home/user/dir/a.txt', '/home/user/dir/moved.txt');
      assert.equal(moved.path, '/home/user/dir/moved.txt');
      assert.equal(await sbx.files.exists('/home/user/dir/a.txt'), false);
      assert.equal(await sbx.files.makeDir('/home/user/new/sub'), true);
      assert.equal(await sbx.files.makeDir('/home/user/new/sub'), false);
      assert.equal((await sbx.files.getInfo('/home/user/new/sub')).type, 'dir');
      await sbx.files.remove('/home/user/new');
      assert.equal(await sbx.files.exists('/home/user/new'), false);
      await sbx.files.remove('/home/user/new'); // removing nothing is fine
    });

    test('files: errors', async () => {
      await assert.rejects(sbx.files.read('/home/user/missing.txt'), (e) => e instanceof NotFoundError);
      await assert.rejects(sbx.files.list('/home/user/missing-dir'), (e) => e instanceof NotFoundError);
      await assert.rejects(sbx.files.rename('/home/user/missing', '/home/user/x'),
        (e) => e instanceof NotFoundError);
    });

    test('files: watchDir', async () => {
      await sbx.files.makeDir('/home/user/watched');
      const events = [];
      const h = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e));
      await sbx.files.write('/home/user/watched/new.txt', 'x');
      await until(() => events.some((e) => e.name === 'new.txt'), 'a watch event');
      await h.stop();
    });

    test('list with filters and pagination', async () => {
      const other = await Sandbox.create('base', { ...opts(), metadata: { suite: name, role: 'second' }, timeoutMs: 60_000 });
      try {
        const all = [];
        const p = Sandbox.list({ ...opts(), query: { metadata: { suite: name } }, limit: 1 });
        while (p.hasNext) {
          const items = await p.nextItems();
          assert.ok(items.length <= 1);
          all.push(...items);
        }
        assert.deepEqual(all.map((s) => s.sandboxId).sort(), [sbx.sandboxId, other.sandboxId].sort());
        const second = await Sandbox.list({ ...opts(), query: { metadata: { role: 'second' }, state: ['running'] } }).nextItems();
        assert.deepEqual(second.map((s) => s.sandboxId), [other.sandboxId]);
        assert.equal(second[0].state, 'running');
        const none = await Sandbox.list({ ...opts(), query: { state: ['paused'] } }).nextItems();
        assert.deepEqual(none, []);
      } finally {
        await other.kill();
      }
    });

    test('setTimeout', async () => {
      await sbx.setTimeout(600_000);
      const left = new Date((await sbx.getInfo()).endAt) - Date.now();
      assert.ok(left > 590_000 && left <= 601_000, `${left}`);
    });

    test('connect keeps a longer timeout (e2b 2.50 and Novita send 300 s)', async () => {
      const long = await Sandbox.create('base', { ...opts(), metadata: { suite: name, role: 'long' }, timeoutMs: 3_600_000 });
      try {
        for (const o of [{}, { timeoutMs: 60_000 }]) {
          const again = await Sandbox.connect(long.sandboxId, { ...opts(), ...o });
          const left = new Date((await again.getInfo()).endAt) - Date.now();
          assert.ok(left > 3_590_000 && left <= 3_601_000, `${JSON.stringify(o)}: ${left}`);
        }
      } finally {
        await long.kill();
      }
    });

    test('snapshots: create, start from, list, delete; fork', async () => {
      await sbx.files.write('/home/user/snap.txt', 'snapped');
      const snap = await sbx.createSnapshot({ ...opts(), name: `${name}-snap` });
      assert.ok(snap.snapshotId);
      const from = await Sandbox.create(snap.snapshotId, { ...opts(), timeoutMs: 60_000 });
      try {
        assert.equal(await from.files.read('/home/user/snap.txt'), 'snapped');
      } finally {
        await from.kill();
      }
      if (Sandbox.listSnapshots) {
        const listed = await Sandbox.listSnapshots({ ...opts(), sandboxId: sbx.sandboxId }).nextItems();
        assert.deepEqual(listed.map((x) => x.snapshotId), [snap.snapshotId]);
      }
      if (Sandbox.fork) {
        const forks = await Sandbox.fork(sbx.sandboxId, { ...opts(), count: 2, timeoutMs: 60_000 });
        assert.equal(forks.length, 2);
        for (const f of forks) {
          assert.ok(!(f instanceof Error), String(f));
          assert.notEqual(f.sandboxId, sbx.sandboxId);
          assert.equal(await f.files.read('/home/user/snap.txt'), 'snapped');
          await f.kill();
        }
      }
      if (Sandbox.deleteSnapshot) {
        assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, opts()), true);
        assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, opts()), false);
      }
    });

    test('pause, then connect resumes it', async () => {
      await sbx.files.write('/home/user/kept.txt', 'kept');
      const paused = sbx.pause ? await sbx.pause() : await sbx.betaPause();
      assert.notEqual(paused, false);
      assert.equal((await sbx.getInfo()).state, 'paused');
      assert.equal(await sbx.isRunning(), false);
      const again = await Sandbox.connect(sbx.sandboxId, opts());
      assert.equal((await again.getInfo()).state, 'running');
      assert.equal(await again.files.read('/home/user/kept.txt'), 'kept');
      assert.equal((await again.commands.run('echo back')).stdout, 'back\n');
      sbx = again;
    });

    test('pause to disk (keepMemory: false), then connect', { skip: prefix === 'NOVITA' && 'Novita has no keepMemory' }, async () => {
      await sbx.files.write('/home/user/disk.txt', 'on disk');
      await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
      assert.equal(await sbx.pause({ keepMemory: false }), true);
      assert.equal((await sbx.getInfo()).state, 'paused');
      const again = await Sandbox.connect(sbx.sandboxId, opts());
      assert.equal(await again.files.read('/home/user/disk.txt'), 'on disk');
      assert.deepEqual(await again.commands.list(), []); // its processes ended with the pause
      sbx = again;
    });

    // The sandbox's network as E2B's SDK sets, reads and replaces it (docs/networking.md). The
    // addresses are the tests' "internet" block: nothing here sends a packet to them.
    test('network: allowInternetAccess, network, updateNetwork, getHost', {
      skip: !Sandbox.prototype.updateNetwork && 'this SDK has no network options',
    }, async () => {
      const s = await Sandbox.create('base', {
        ...opts(), allowInternetAccess: false, timeoutMs: 60_000,
        network: { allowOut: ['198.18.0.1'], allowPublicTraffic: false },
      });
      try {
        const info = await s.getInfo();
        assert.equal(info.allowInternetAccess, false);
        assert.deepEqual(info.network.allowOut, ['198.18.0.1']);
        assert.equal(info.network.allowPublicTraffic, false);
        assert.match(s.trafficAccessToken ?? '', /^[0-9a-f]{64}$/);
        await s.updateNetwork({ allowOut: [], denyOut: ['198.18.0.2'] });
        const after = await s.getInfo();
        assert.equal(after.allowInternetAccess, true);
        assert.deepEqual(after.network.denyOut, ['198.18.0.2']);
        await s.updateNetwork({ allowInternetAccess: false });
        assert.equal((await s.getInfo()).allowInternetAccess, false);
        assert.equal(s.getHost(3000), `3000-${s.sandboxId}.warren.test`);
        await assert.rejects(
          Sandbox.create('base', { ...opts(), network: { allowOut: ['example.test'] } }),
          (e) => /ALL_TRAFFIC/.test(e.message));
        await assert.rejects(
          Sandbox.create('base', { ...opts(), network: { denyOut: ['example.test'] } }),
          (e) => /invalid denied CIDR example.test/.test(e.message));
      } finally {
        await s.kill();
      }
    });

    test("another team's sandbox is not found", async () => {
      await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: keyB }), (e) => e instanceof NotFoundError);
      await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: keyB }), (e) => e instanceof NotFoundError);
      const listed = await Sandbox.list({ apiKey: keyB }).nextItems();
      assert.deepEqual(listed, []);
      const killed = await Sandbox.kill(sbx.sandboxId, { apiKey: keyB });
      assert.notEqual(killed, true);
      assert.equal(await sbx.isRunning(), true);
    });

    test('getHost: a server started in the sandbox, through the daemon', async () => {
      await sbx.files.write('/tmp/compat_srv.py',
        'import http.server\n' +
        'class H(http.server.BaseHTTPRequestHandler):\n' +
        '    def do_GET(self):\n' +
        '        b = ("hello from " + self.path).encode()\n' +
        '        self.send_response(200); self.send_header("Content-Length", str(len(b)))\n' +
        '        self.end_headers(); self.wfile.write(b)\n' +
        '    def log_message(self, *a): pass\n' +
        'http.server.HTTPServer(("0.0.0.0", 8123), H).serve_forever()\n');
      await sbx.commands.run('python3 /tmp/compat_srv.py', { background: true });
      const host = sbx.getHost(8123);
      assert.equal(host, `8123-${sbx.sandboxId}.warren.test`);
      // The wildcard DNS and TLS of a deployment are a front proxy's; here the request goes to
      // the daemon's port with the Host the SDK built.
      const get = () => new Promise((resolve, reject) => {
        const r = http.get({ host: '127.0.0.1', port: d.port, path: '/compat', headers: { Host: host } },
          (res) => { let b = ''; res.on('data', (c) => { b += c; }); res.on('end', () => resolve([res.statusCode, b])); });
        r.on('error', reject);
      });
      let st, body;
      await until(async () => { [st, body] = await get(); return st === 200; }, 'the server in the sandbox');
      assert.equal(body, 'hello from /compat');
    });

    test('a bad access token is refused', async () => {
      const r = await fetch(`${d.url}/process.Process/List`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': 'f'.repeat(64) },
        body: '{}',
      });
      assert.equal(r.status, 401);
      assert.equal((await r.json()).code, 'unauthenticated');
    });

    test('unknown sandbox; kill', async () => {
      await assert.rejects(Sandbox.connect('doesnotexist0000', opts()), (e) => e instanceof NotFoundError);
      const id = sbx.sandboxId;
      const killed = await sbx.kill();
      assert.notEqual(killed, false);
      await assert.rejects(Sandbox.getInfo(id, opts()), (e) => e instanceof NotFoundError);
      const again = await Sandbox.kill(id, opts());
      assert.notEqual(again, true);
    });
  });
}
