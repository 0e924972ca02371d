// SPDX-License-Identifier: Apache-2.0
// The SDK (the built package, dist/) against a real warrend: sandboxes, commands, files, pause,
// snapshots, forks, volumes, network, ports, usage, errors and aborts, over TCP (fetch) and over
// the unix socket (node:http).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Readable } from 'node:stream';
import * as W from '../dist/index.mjs';
import { Daemon, isClean, unavailable } from './harness.mjs';

const skip = unavailable();
const { Sandbox, Client, Volume, Snapshot, Template } = W;

describe('sandbox', { skip, concurrency: false }, () => {
  let d, client, sb;
  before(async () => {
    d = await new Daemon('sb').start();
    client = new Client({ apiUrl: d.url, apiKey: await d.key('team-ts') });
    sb = await Sandbox.create({ client, timeout: 300, metadata: { suite: 'tssdk' } });
  });
  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('creates, connects and lists', async () => {
    assert.match(sb.id, /\S+/);
    assert.equal(sb.info.state, 'running');
    assert.equal(sb.info.template, 'base');
    assert.equal(sb.info.metadata.suite, 'tssdk');
    assert.ok(sb.info.expiresAt instanceof Date);
    const again = await Sandbox.connect(sb.id, { client });
    assert.equal(again.id, sb.id);
    assert.equal(again.sandboxId, sb.id);
    const seen = [];
    for await (const info of Sandbox.list({ client, metadata: { suite: 'tssdk' } })) seen.push(info.id);
    assert.deepEqual(seen, [sb.id]);
    assert.equal(await sb.isRunning(), true);
    // A create repeated with its Idempotency-Key answers the first sandbox.
    const a = await Sandbox.create({ client, idempotencyKey: 'ts-same' });
    const b = await Sandbox.create({ client, idempotencyKey: 'ts-same' });
    assert.equal(a.id, b.id);
    await a.kill();
    const info = await sb.setTimeout(600);
    assert.ok(info.expiresAt.getTime() > Date.now() + 500_000);
  });

  it('lists page by page', async () => {
    const more = await Promise.all([1, 2].map(() => Sandbox.create('base', { client, metadata: { page: 'x' } })));
    const ids = [];
    for await (const info of Sandbox.list({ client, metadata: { page: 'x' }, pageSize: 1 })) ids.push(info.id);
    assert.deepEqual(ids.sort(), more.map((s) => s.id).sort());
    const one = [];
    for await (const info of Sandbox.list({ client, metadata: { page: 'x' }, limit: 1 })) one.push(info.id);
    assert.equal(one.length, 1);
    assert.equal(await more[0].kill(), true);
    assert.equal(await Sandbox.kill(more[1].id, { client }), true);
    assert.equal(await more[0].kill(), false);
    assert.equal(await Sandbox.kill(more[1].id, { client }), false);
    await assert.rejects(Sandbox.connect(more[0].id, { client }), W.NotFoundError);
  });

  it('runs commands and waits', async () => {
    const r = await sb.commands.run('echo hello; echo oops >&2');
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'hello\n');
    assert.equal(r.stderr, 'oops\n');
    assert.ok(r.ok);
    const argv = await sb.commands.run(['printf', '%s|', 'a b', 'c'], { cwd: '/tmp', env: { X: '1' } });
    assert.equal(argv.stdout, 'a b|c|');
    const env = await sb.commands.run('echo $X $PWD', { cwd: '/tmp', env: { X: 'ex' } });
    assert.equal(env.stdout, 'ex /tmp\n');
    const bytes = await sb.commands.run("printf '\\377\\000\\001'");
    assert.deepEqual([...bytes.stdoutBytes], [255, 0, 1]);
    assert.equal((await sb.commands.run('id -un')).stdout, 'user\n');
    assert.equal((await sb.commands.run('id -un', { user: 'root' })).stdout, 'root\n');
    const stdin = await sb.commands.run('cat; echo', { stdin: 'from stdin' });
    assert.equal(stdin.stdout, 'from stdin\n');
  });

  it('throws CommandExitError unless check is off', async () => {
    const e = await sb.commands.run('echo bad >&2; exit 3').then(() => null, (x) => x);
    assert.ok(e instanceof W.CommandExitError);
    assert.ok(e instanceof W.WarrenError);
    assert.equal(e.exitCode, 3);
    assert.equal(e.result.stderr, 'bad\n');
    assert.equal(e.code, 'exit');
    const r = await sb.commands.run('exit 4', { check: false });
    assert.equal(r.exitCode, 4);
    assert.equal(r.error, 'exit code 4');
    const t = await sb.commands.run('sleep 10', { timeout: 1, check: false });
    assert.equal(t.timedOut, true);
  });

  it('streams output to callbacks', async () => {
    const out = [], err = [];
    const r = await sb.commands.run('for i in 1 2 3; do echo $i; sleep 0.05; done; echo e >&2', {
      onStdout: (s) => out.push(s), onStderr: (s) => err.push(s),
    });
    assert.equal(out.join(''), '1\n2\n3\n');
    assert.ok(out.length >= 2, 'output came in pieces');
    assert.equal(err.join(''), 'e\n');
    assert.equal(r.stdout, '1\n2\n3\n');
    // A multi-byte character split across chunks is kept whole.
    const euro = [];
    await sb.commands.run("printf '\\342\\202'; sleep 0.1; printf '\\254\\n'", { onStdout: (s) => euro.push(s) });
    assert.equal(euro.join(''), '€\n');
    assert.ok(!euro.join('').includes('\ufffd'));
  });

  it('kills a command whose callback throws', async () => {
    await assert.rejects(sb.commands.run('echo go; sleep 30', { onStdout: () => { throw new Error('cb'); } }), /cb/);
    const end = Date.now() + 5000;
    let procs;
    do { procs = await sb.commands.list(); } while (procs.some((p) => p.running) && Date.now() < end);
    assert.ok(procs.every((p) => !p.running), JSON.stringify(procs.filter((p) => p.running)));
    assert.equal(procs.find((p) => p.cmd.at(-1) === 'echo go; sleep 30').signal, 9);
  });

  it('runs background commands with handles', async () => {
    const h = await sb.commands.run('read line; echo got $line; exec cat', { background: true });
    assert.ok(h instanceof W.CommandHandle);
    assert.ok(h.pid > 0);
    await h.sendStdin('one\n');
    await h.sendStdin('two\n');
    await h.closeStdin();
    const r = await h.wait();
    assert.equal(r.stdout, 'got one\ntwo\n');
    const info = await sb.commands.get(h.pid);
    assert.equal(info.running, false);
    assert.equal(info.exitCode, 0);
    await sb.commands.release(h.pid);
    await assert.rejects(sb.commands.get(h.pid), W.NotFoundError);

    const k = await sb.commands.run('sleep 100', { background: true });
    assert.equal(await k.kill(), true);
    const kr = await k.wait({ check: false });
    assert.equal(kr.exitCode, undefined);
    assert.equal(kr.signal, 9);
    await assert.rejects(k.wait(), W.CommandExitError);
  });

  it('streams a background command to callbacks and attaches', async () => {
    const seen = [];
    const h = await sb.commands.run('echo a; sleep 0.2; echo b', { background: true, onStdout: (s) => seen.push(s) });
    const r = await h.wait();
    assert.equal(seen.join(''), 'a\nb\n');
    assert.equal(r.stdout, 'a\nb\n');
    const bg = await sb.commands.run('echo x; sleep 0.2; echo y >&2', { background: true });
    const evs = [];
    for await (const ev of bg) evs.push(ev.type === 'stdout' || ev.type === 'stderr' ? `${ev.type}:${ev.text}` : ev.type);
    assert.deepEqual(evs.filter((e) => e !== 'start'), ['stdout:x\n', 'stderr:y\n', 'exit']);
    const h2 = await sb.commands.connect(bg.pid);
    assert.equal((await h2.wait()).stdout, 'x\n');
    await assert.rejects(sb.commands.connect(99999), W.NotFoundError);
    const sig = await sb.commands.run('trap "echo term; exit 7" TERM; echo ready; while :; do sleep 0.05; done', { background: true });
    await new Promise((res) => setTimeout(res, 300));
    await sig.signal('TERM');
    const sr = await sig.wait({ check: false });
    assert.equal(sr.exitCode, 7);
  });

  it('writes and reads files, streamed both ways', async () => {
    const f = await sb.files.write('/tmp/t/a.txt', 'hello');
    assert.equal(f.size, 5);
    assert.equal(f.isFile, true);
    assert.equal(await sb.files.read('/tmp/t/a.txt'), 'hello');
    assert.deepEqual([...(await sb.files.read('/tmp/t/a.txt', { format: 'bytes', offset: 1, length: 3 }))], [...new TextEncoder().encode('ell')]);
    // 3 MiB from a generator (chunked), read back as a stream.
    const chunk = new Uint8Array(64 * 1024).map((_, i) => i & 255);
    async function* gen() { for (let i = 0; i < 48; i++) yield chunk; }
    const big = await sb.files.write('/tmp/t/big.bin', gen(), { mode: 0o600 });
    assert.equal(big.size, 48 * chunk.length);
    assert.equal(big.permissions, '0600');
    const s = await sb.files.read('/tmp/t/big.bin', { format: 'stream' });
    let n = 0, bad = 0, pieces = 0;
    for await (const c of s) { pieces++; for (let i = 0; i < c.length; i++) if (c[i] !== ((n + i) & 255)) bad++; n += c.length; }
    assert.equal(n, 48 * chunk.length);
    assert.equal(bad, 0);
    assert.ok(pieces > 1);
    // Stopping early drops the connection; the next calls go on.
    const early = await sb.files.read('/tmp/t/big.bin', { format: 'stream' });
    for await (const c of early) { assert.ok(c.length > 0); break; }
    assert.equal(await sb.files.read('/tmp/t/a.txt'), 'hello');
    // A web ReadableStream, a Node Readable and a Blob.
    await sb.files.write('/tmp/t/web.txt', new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('web')); c.close(); } }));
    assert.equal(await sb.files.read('/tmp/t/web.txt'), 'web');
    await sb.files.write('/tmp/t/node.txt', Readable.from([Buffer.from('no'), Buffer.from('de')]));
    assert.equal(await sb.files.read('/tmp/t/node.txt'), 'node');
    await sb.files.write('/tmp/t/blob.txt', new Blob(['bl', 'ob']));
    assert.equal(await (await sb.files.read('/tmp/t/blob.txt', { format: 'blob' })).text(), 'blob');
    const infos = await sb.files.writeFiles([{ path: '/tmp/t/m1', data: '1' }, { path: '/tmp/t/m2', data: new Uint8Array([50]) }]);
    assert.deepEqual(infos.map((i) => i.size), [1, 1]);
  });

  it('lists, stats, renames, makes and removes', async () => {
    assert.equal(await sb.files.makeDir('/tmp/d/e'), true);
    assert.equal(await sb.files.makeDir('/tmp/d/e'), true); // with parents, an existing dir is fine
    assert.equal(await sb.files.makeDir('/tmp/d/e', { parents: false }), false);
    await sb.files.write('/tmp/d/e/f', 'x');
    const names = (await sb.files.list('/tmp/d', { depth: 2 })).map((e) => e.path).sort();
    assert.deepEqual(names, ['/tmp/d/e', '/tmp/d/e/f']);
    const st = await sb.files.getInfo('/tmp/d/e');
    assert.equal(st.type, 'dir');
    const moved = await sb.files.rename('/tmp/d/e/f', '/tmp/d/g');
    assert.equal(moved.path, '/tmp/d/g');
    assert.equal(await sb.files.exists('/tmp/d/e/f'), false);
    assert.equal(await sb.files.exists('/tmp/d/g'), true);
    await assert.rejects(sb.files.remove('/tmp/d'), W.ConflictError);
    await sb.files.remove('/tmp/d', { recursive: true });
    assert.equal(await sb.files.exists('/tmp/d'), false);
    const e = await sb.files.read('/nope').then(() => null, (x) => x);
    assert.ok(e instanceof W.NotFoundError);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'not_found');
    assert.match(e.requestId, /^ts-/);
    await assert.rejects(sb.files.read('/tmp/t/a.txt', { offset: 100, length: 1, format: 'bytes' }), W.RangeNotSatisfiableError);
  });

  it('watches a directory', async () => {
    await sb.files.makeDir('/tmp/w');
    const evs = [];
    const w = await sb.files.watchDir('/tmp/w', (ev) => { evs.push(ev); });
    await sb.files.write('/tmp/w/new', 'x');
    const end = Date.now() + 5000;
    while (!evs.some((e) => e.name === 'new') && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    await w.stop();
    assert.ok(evs.some((e) => e.name === 'new'), JSON.stringify(evs));
    assert.equal(w.isRunning, false);
  });

  it('pauses and resumes', async () => {
    const h = await sb.commands.run('sleep 1000', { background: true });
    const p = await sb.pause();
    assert.equal(p.state, 'paused');
    assert.equal(p.pausedMode, 'memory');
    assert.ok(p.remainingMs > 0);
    assert.equal(await sb.isPaused(), true);
    await assert.rejects(sb.commands.run('true'), W.ConflictError);
    const r = await sb.resume();
    assert.equal(r.state, 'running');
    assert.equal(r.processesKept, true);
    assert.equal((await h.info()).running, true);
    await h.kill();
    await h.wait({ check: false });
  });

  it('snapshots and forks', async () => {
    await sb.files.write('/root/state', 'ready', { user: 'root' });
    const snap = await sb.snapshot({ name: 'ts-ready' });
    assert.ok(snap instanceof Snapshot);
    assert.match(snap.id, /^snap-/);
    assert.equal(snap.name, 'ts-ready');
    assert.ok(snap.freezeMs >= 0);
    assert.ok((await Snapshot.list({ client })).some((s) => s.id === snap.id));
    assert.equal((await Snapshot.get('ts-ready', { client })).id, snap.id);
    const copy = await Sandbox.create({ client, template: snap });
    assert.equal(await copy.files.read('/root/state', { user: 'root' }), 'ready');
    await copy.kill();
    await Snapshot.delete(snap.id, { client });
    await assert.rejects(Snapshot.get(snap.id, { client }), W.NotFoundError);

    const forks = await sb.fork({ count: 2, metadata: { fork: '1' } });
    assert.equal(forks.ok, true);
    assert.equal(forks.sandboxes.length, 2);
    for (const c of forks.sandboxes) {
      assert.notEqual(c.id, sb.id);
      assert.equal(await c.files.read('/root/state', { user: 'root' }), 'ready');
      assert.equal(c.info.metadata.fork, '1');
    }
    await forks.killAll();
    assert.equal(await forks.sandboxes[0].isRunning(), false);
  });

  it('pauses to disk', async () => {
    const c = await Sandbox.create({ client });
    await c.files.write('/tmp/kept', 'yes');
    const p = await c.pause({ mode: 'disk' });
    assert.equal(p.pausedMode, 'disk');
    const r = await c.resume({ timeout: 120 });
    assert.equal(r.processesKept, false);
    assert.equal(await c.files.read('/tmp/kept'), 'yes');
    await c.kill();
  });

  it('mounts volumes', async () => {
    const v = await Volume.create('ts-cache', { client });
    assert.equal(v.name, 'ts-cache');
    assert.ok((await Volume.list({ client })).some((x) => x.name === 'ts-cache'));
    const a = await Sandbox.create({ client, volumes: ['ts-cache:/cache'] });
    const b = await Sandbox.create({ client, volumes: [{ name: 'ts-cache', path: '/c', readonly: true }] });
    assert.deepEqual(b.info.volumes, [{ name: 'ts-cache', path: '/c', readonly: true }]);
    await a.commands.run('echo hi > /cache/x');
    assert.equal((await b.commands.run('cat /c/x')).stdout, 'hi\n');
    assert.notEqual((await b.commands.run('echo no > /c/y', { check: false })).exitCode, 0);
    await assert.rejects(Volume.delete('ts-cache', { client }), W.ConflictError);
    await a.kill(); await b.kill();
    assert.ok((await Volume.get('ts-cache', { client })).diskBytes >= 0);
    await Volume.delete('ts-cache', { client });
    await assert.rejects(Volume.get('ts-cache', { client }), W.NotFoundError);
  });

  it('gets and replaces the network policy', async () => {
    // The daemon's default is no internet; a create that asks for a policy gets an address.
    assert.equal((await sb.network()).enabled, false);
    const net = await Sandbox.create({ client, internet: false, maxConnections: 5 });
    assert.equal(net.info.network.maxConnections, 5);
    const n = await net.network();
    assert.equal(n.enabled, true);
    assert.equal(n.internet, false);
    assert.match(n.address, /^10\./);
    const u = await net.updateNetwork({ internet: false, allowOut: ['198.18.0.1'], denyOut: ['198.18.1.0/24'], maxConnections: 10 });
    assert.deepEqual(u.allowOut, ['198.18.0.1']);
    assert.deepEqual(u.denyOut, ['198.18.1.0/24']);
    assert.equal(u.maxConnections, 10);
    assert.deepEqual((await net.network()).allowOut, ['198.18.0.1']);
    await assert.rejects(net.updateNetwork({ allowOut: ['not an address!'] }), W.InvalidArgumentError);
    const st = await net.networkStats();
    assert.equal(typeof st.bytesOut, 'number');
    const log = [];
    await net.commands.run(['bash', '-c', 'timeout 2 bash -c "exec 3<>/dev/tcp/198.18.1.7/80"'], { check: false }); // denied: logged
    const end = Date.now() + 5000;
    while (!log.length && Date.now() < end) {
      for await (const e of net.networkLog()) log.push(e);
      if (!log.length) await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(log.some((e) => e.address === '198.18.1.7' && e.allowed === false), JSON.stringify(log));
    // Followed: the entries so far, then the stream ends when the sandbox's record is deleted.
    const followed = [];
    const reader = (async () => { for await (const e of net.networkLog({ follow: true })) followed.push(e); })();
    const until = Date.now() + 5000;
    while (!followed.length && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.ok(followed.length >= 1);
    await net.kill();
    await reader;
    const loop = await Sandbox.create({ client, network: false });
    assert.equal((await loop.network()).enabled, false);
    await assert.rejects(loop.updateNetwork({ internet: false }), W.ConflictError);
    await loop.kill();
  });

  it('lists ports and reaches them through getHost', async () => {
    const srv = await sb.commands.run('exec python3 -m http.server 8080 --bind 127.0.0.1 -d /tmp/t', { background: true });
    let ports = [];
    const end = Date.now() + 10_000;
    while (!ports.some((p) => p.port === 8080) && Date.now() < end) { ports = await sb.ports(); await new Promise((r) => setTimeout(r, 100)); }
    assert.ok(ports.some((p) => p.port === 8080 && p.protocol === 'tcp'), JSON.stringify(ports));
    const host = await sb.getHost(8080);
    assert.equal(host, `${d.url}/v1/sandboxes/${sb.id}/ports/8080`);
    const r = await fetch(`${host}/a.txt`, { headers: { Authorization: `Bearer ${await d.key('team-ts')}` } });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'hello');
    await assert.rejects(sb.getHost(0), RangeError);
    await srv.kill();
    await srv.wait({ check: false });
  });

  it('reports metrics and disk use', async () => {
    const m = await sb.metrics();
    assert.ok(m.length >= 1);
    assert.ok(m.at(-1).memoryBytes > 0);
    assert.ok(m.at(-1).timestamp instanceof Date);
    const du = await sb.diskUsage();
    assert.ok(du.usedBytes > 0);
  });

  it('throws typed errors with the API code', async () => {
    const bad = new Client({ apiUrl: d.url, apiKey: 'nope' });
    const e = await Sandbox.list({ client: bad }).next().then(() => null, (x) => x);
    assert.ok(e instanceof W.AuthenticationError);
    assert.equal(e.status, 401);
    await assert.rejects(Sandbox.create({ client, template: 'no-such-template' }), W.NotFoundError);
    await assert.rejects(Sandbox.create({ client, memoryMb: -5 }), W.InvalidArgumentError);
    // A device the host does not have: the error names it.
    assert.ok(Array.isArray(await client.devices()));
    const de = await Sandbox.create({ client, devices: ['warren.test/dev=none'] }).then(() => null, (x) => x);
    assert.ok(de instanceof W.InvalidArgumentError && /warren.test\/dev=none/.test(de.message), String(de));
    assert.deepEqual(sb.info.devices, []);
    // Another team's sandbox is not found.
    const other = new Client({ apiUrl: d.url, apiKey: await d.key('team-other') });
    await assert.rejects(Sandbox.connect(sb.id, { client: other }), W.NotFoundError);
    // Nothing listens: a connection error, not retried forever.
    const dead = new Client({ apiUrl: 'http://127.0.0.1:9', maxRetries: 1, retryBaseMs: 10 });
    const ce = await dead.version().then(() => null, (x) => x);
    assert.ok(ce instanceof W.APIConnectionError, String(ce));
    assert.equal(ce.code, 'connection');
    assert.equal(ce.status, undefined);
    assert.equal(await dead.health(), false);
    assert.equal(await client.health(), true);
  });

  it('aborts calls and times them out', async () => {
    const ac = new AbortController();
    const p = sb.commands.run('sleep 20', { signal: ac.signal });
    setTimeout(() => ac.abort(), 200);
    const t0 = Date.now();
    const e = await p.then(() => null, (x) => x);
    assert.ok(e instanceof W.AbortError, String(e));
    assert.equal(e.code, 'aborted');
    assert.ok(Date.now() - t0 < 5000);
    const pre = new AbortController(); pre.abort();
    await assert.rejects(sb.getInfo({ signal: pre.signal }), W.AbortError);
    const te = await sb.commands.run('sleep 20', { requestTimeoutMs: 300 }).then(() => null, (x) => x);
    assert.ok(te instanceof W.TimeoutError, String(te));
    assert.equal(te.code, 'client_timeout');
    // A streamed run aborted mid-way kills its command.
    const ac2 = new AbortController();
    const s = sb.commands.run('echo started; sleep 30', { signal: ac2.signal, onStdout: () => ac2.abort() });
    await assert.rejects(s, W.AbortError);
    const end = Date.now() + 5000;
    let procs;
    const streamed = (x) => x.cmd.at(-1) === 'echo started; sleep 30';
    do { procs = await sb.commands.list(); } while (procs.some((x) => streamed(x) && x.running) && Date.now() < end);
    assert.ok(procs.some(streamed));
    assert.ok(procs.filter(streamed).every((x) => !x.running), JSON.stringify(procs.filter((x) => x.running)));
    // A command in wait mode goes on when its client goes away (openapi: exec): kill those.
    for (const x of procs) if (x.running) await sb.commands.kill(x.pid);
  });
});

describe('unix socket', { skip, concurrency: false }, () => {
  let d;
  before(async () => { d = await new Daemon('unix', ['--domain', 'warren.test']).start(); });
  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('does the same over unix:// (node:http)', async () => {
    const client = new Client({ apiUrl: d.unixUrl });
    assert.equal(client.hasApiKey, false);
    const v = await client.version();
    assert.equal(v.api, '1');
    const sb = await Sandbox.create({ client });
    const r = await sb.commands.run('echo $((6*7))');
    assert.equal(r.stdout, '42\n');
    const out = [];
    await sb.commands.run('echo a; echo b', { onStdout: (s) => out.push(s) });
    assert.equal(out.join(''), 'a\nb\n');
    async function* gen() { for (let i = 0; i < 20; i++) yield new Uint8Array(100_000).fill(i); }
    assert.equal((await sb.files.write('/tmp/u', gen())).size, 2_000_000);
    const bytes = await sb.files.read('/tmp/u', { format: 'bytes', offset: 1_999_999, length: 1 });
    assert.deepEqual([...bytes], [19]);
    const h = await sb.commands.run('cat', { background: true });
    await h.sendStdin('pipe');
    await h.closeStdin();
    assert.equal((await h.wait()).stdout, 'pipe');
    assert.equal(await sb.getHost(80), `80-${sb.id}.warren.test`); // the daemon's --domain
    await assert.rejects(client.request('GET', '/v1/sandboxes/nope'), W.NotFoundError);
    const ac = new AbortController();
    const p = sb.commands.run('sleep 20', { signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    await assert.rejects(p, W.AbortError);
    assert.equal(await sb.kill(), true);
    client.close();
    // Keys (the unix socket acts as the admin team).
    const k = await W.admin.createKey('team-unix', { client, name: 'k1' });
    assert.match(k.key, /\S{16,}/);
    assert.equal(k.team, 'team-unix');
    assert.ok((await W.admin.listKeys({ client })).some((x) => x.id === k.id && x.key === undefined));
    const keyed = new Client({ apiUrl: d.url, apiKey: k.key });
    assert.equal((await keyed.version()).api, '1');
    await W.admin.deleteKey(k.id, { client });
    await assert.rejects(keyed.version(), W.AuthenticationError);
    // An env-configured client.
    process.env.WARREN_API_URL = d.unixUrl;
    try { assert.equal(new Client().apiUrl, d.unixUrl); } finally { delete process.env.WARREN_API_URL; }
  });
});
