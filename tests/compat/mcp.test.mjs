// SPDX-License-Identifier: Apache-2.0
// The MCP server (docs/mcp.md) driven by @modelcontextprotocol/sdk 1.32.2's client, unchanged,
// over both transports: Streamable HTTP to warrend's /mcp, and stdio through `warren mcp`.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Daemon, baseAvailable, isClean, templateAvailable } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const BUILD = process.env.WARREN_BUILD || path.join(here, '../../build');
const ALLOWED_ORIGIN = 'http://localhost:6274';
const skip = baseAvailable() ? false : 'no base template (WARREN_BASE_TEMPLATE)';

const TOOLS = [
  'sandbox_create', 'sandbox_list', 'sandbox_kill', 'sandbox_exec', 'sandbox_start_process',
  'sandbox_read_output', 'sandbox_read_file', 'sandbox_write_file', 'sandbox_list_files',
  'sandbox_pause', 'sandbox_resume', 'sandbox_snapshot', 'sandbox_fork', 'sandbox_port_url',
  'run_code', 'sandbox_diff', 'desktop_screenshot', 'desktop_action',
];
// A 1x1 PNG.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

let d, keyA, keyB;

// The templates of run_code and the desktop tools, when the machine has them built.
function linkTemplates(daemon) {
  const root = process.env.WARREN_TEST_TEMPLATES || '/var/cache/warren/test-templates';
  for (const name of ['code-interpreter-v1', 'desktop']) {
    const src = path.join(root, name), dst = path.join(daemon.state, 'templates', name);
    if (!fs.existsSync(path.join(src, 'config.json')) || fs.existsSync(dst)) continue;
    fs.mkdirSync(dst, { recursive: true });
    fs.symlinkSync(path.join(path.resolve(src), 'rootfs'), path.join(dst, 'rootfs'));
    fs.copyFileSync(path.join(src, 'config.json'), path.join(dst, 'config.json'));
  }
}

async function httpClient(key, { origin } = {}) {
  const headers = {};
  if (key) headers.Authorization = `Bearer ${key}`;
  if (origin) headers.Origin = origin;
  const transport = new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`), { requestInit: { headers } });
  const client = new Client({ name: 'warren-compat', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function stdioClient(key) {
  const transport = new StdioClientTransport({
    command: path.join(BUILD, 'warren'),
    args: ['mcp'],
    env: { PATH: process.env.PATH, HOME: d.dir, WARREN_API_URL: d.url, WARREN_API_KEY: key },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'warren-compat-stdio', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

// A tool call that must succeed: its structuredContent.
async function ok(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name}: ${JSON.stringify(r)}`);
  assert.equal(r.content.at(-1).type, 'text');
  assert.deepEqual(JSON.parse(r.content.at(-1).text), r.structuredContent, 'the text mirrors it');
  return r.structuredContent;
}

async function fails(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r)}`);
  return r.structuredContent;
}

async function rest(method, p, key = d.adminKey) {
  const r = await fetch(`${d.url}${p}`, { method, headers: { Authorization: `Bearer ${key}` } });
  return r;
}

// The whole life of a sandbox through the tools.
async function lifecycle(client) {
  const made = await ok(client, 'sandbox_create', { timeout_s: 300, metadata: { by: 'mcp' } });
  const id = made.sandbox_id;
  assert.match(id, /^[A-Za-z0-9_-]+$/);
  assert.equal(made.state, 'running');
  try {
    const hi = await ok(client, 'sandbox_exec', { sandbox_id: id, command: 'echo hi' });
    assert.equal(hi.stdout, 'hi\n');
    assert.equal(hi.exit_code, 0);
    // bash -lc: a login bash where there is one.
    const sh = await ok(client, 'sandbox_exec', { sandbox_id: id, command: 'echo $BASH_VERSION; shopt -q login_shell && echo login' });
    assert.match(sh.stdout, /^\d+\.\d+.*\nlogin\n$/);
    const bad = await fails(client, 'sandbox_exec', { sandbox_id: id, command: 'echo oops >&2; exit 3' });
    assert.equal(bad.exit_code, 3);
    assert.equal(bad.stderr, 'oops\n');
    const big = await ok(client, 'sandbox_exec', { sandbox_id: id, command: 'head -c 100000 /dev/zero | tr "\\0" a', max_output_bytes: 1000 });
    assert.equal(big.stdout, 'a'.repeat(1000));
    assert.equal(big.truncated, true);
    const slow = await fails(client, 'sandbox_exec', { sandbox_id: id, command: 'sleep 30', timeout_s: 1 });
    assert.equal(slow.timed_out, true);

    const w = await ok(client, 'sandbox_write_file', { sandbox_id: id, path: '/tmp/mcp/hello.txt', content: 'hello\n' });
    assert.equal(w.bytes, 6);
    const rd = await ok(client, 'sandbox_read_file', { sandbox_id: id, path: '/tmp/mcp/hello.txt' });
    assert.equal(rd.content, 'hello\n');
    assert.equal(rd.encoding, 'utf8');
    await ok(client, 'sandbox_write_file', { sandbox_id: id, path: '/tmp/mcp/dot.png', content: PNG, encoding: 'base64' });
    const img = await client.callTool({ name: 'sandbox_read_file', arguments: { sandbox_id: id, path: '/tmp/mcp/dot.png' } });
    assert.equal(img.isError, false);
    assert.deepEqual(img.content[0], { type: 'image', data: PNG, mimeType: 'image/png' });
    const part = await ok(client, 'sandbox_read_file', { sandbox_id: id, path: '/tmp/mcp/hello.txt', max_bytes: 3 });
    assert.equal(part.content, 'hel');
    assert.equal(part.truncated, true);
    const ls = await ok(client, 'sandbox_list_files', { sandbox_id: id, path: '/tmp/mcp' });
    assert.deepEqual(ls.entries.map((e) => e.name).sort(), ['dot.png', 'hello.txt']);
    assert.equal(ls.entries.find((e) => e.name === 'hello.txt').size, 6);
    const missing = await fails(client, 'sandbox_read_file', { sandbox_id: id, path: '/tmp/mcp/nope' });
    assert.equal(missing.code, 'not_found');

    const bg = await ok(client, 'sandbox_start_process', { sandbox_id: id, command: 'for i in 1 2 3; do echo line$i; sleep 0.2; done; echo done >&2' });
    assert.ok(bg.pid > 0);
    const out = await ok(client, 'sandbox_read_output', { sandbox_id: id, pid: bg.pid, wait_s: 20 });
    assert.equal(out.stdout, 'line1\nline2\nline3\n');
    assert.equal(out.stderr, 'done\n');
    assert.equal(out.running, false);
    assert.equal(out.exit_code, 0);
    const srv = await ok(client, 'sandbox_start_process', { sandbox_id: id, command: 'echo started; exec sleep 600' });
    const t0 = Date.now();
    const run = await ok(client, 'sandbox_read_output', { sandbox_id: id, pid: srv.pid, wait_s: 1 });
    assert.ok(Date.now() - t0 >= 900, 'waited for the end');
    assert.equal(run.running, true);
    assert.equal(run.exit_code, null);
    assert.equal(run.stdout, 'started\n');
    const now = await ok(client, 'sandbox_read_output', { sandbox_id: id, pid: srv.pid });
    assert.equal(now.stdout, 'started\n');
    assert.equal(now.running, true);

    const web = await ok(client, 'sandbox_start_process', { sandbox_id: id, command: 'cd /tmp/mcp && exec python3 -m http.server 8000 --bind 127.0.0.1' });
    let url;
    for (let i = 0; i < 100; i++) {
      url = await ok(client, 'sandbox_port_url', { sandbox_id: id, port: 8000 });
      if (url.listening) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(url.listening, true, JSON.stringify(url));
    assert.equal(url.host, `8000-${id}.${d.domain}`);
    assert.equal(url.url, `https://8000-${id}.${d.domain}/`);
    assert.equal(url.native_url, `${d.url}/v1/sandboxes/${id}/ports/8000/`);
    // The URL it names serves the port (E2B's Host routing, and the keyed native path).
    const viaHost = await fetch(`${d.url}/hello.txt`, { headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '8000' } });
    assert.equal(await viaHost.text(), 'hello\n');
    const viaNative = await fetch(`${url.native_url}hello.txt`, { headers: { Authorization: `Bearer ${keyA}` } });
    assert.equal(await viaNative.text(), 'hello\n');
    assert.ok(web.pid > 0);
    const closed = await ok(client, 'sandbox_port_url', { sandbox_id: id, port: 8001 });
    assert.equal(closed.listening, false);

    const paused = await ok(client, 'sandbox_pause', { sandbox_id: id });
    assert.equal(paused.state, 'paused');
    const busy = await fails(client, 'sandbox_exec', { sandbox_id: id, command: 'true' });
    assert.equal(busy.code, 'conflict');
    const resumed = await ok(client, 'sandbox_resume', { sandbox_id: id });
    assert.equal(resumed.state, 'running');
    assert.equal(resumed.processes_kept, true);
    assert.equal((await ok(client, 'sandbox_read_output', { sandbox_id: id, pid: srv.pid })).running, true);

    const snap = await ok(client, 'sandbox_snapshot', { sandbox_id: id });
    assert.match(snap.snapshot_id, /^snap-/);
    const fromSnap = await ok(client, 'sandbox_create', { template: snap.snapshot_id });
    assert.equal((await ok(client, 'sandbox_read_file', { sandbox_id: fromSnap.sandbox_id, path: '/tmp/mcp/hello.txt' })).content, 'hello\n');
    await ok(client, 'sandbox_kill', { sandbox_id: fromSnap.sandbox_id });

    const forked = await ok(client, 'sandbox_fork', { sandbox_id: id, count: 1 });
    assert.equal(forked.sandbox_ids.length, 1);
    const child = forked.sandbox_ids[0];
    assert.notEqual(child, id);
    assert.equal((await ok(client, 'sandbox_exec', { sandbox_id: child, command: 'cat /tmp/mcp/hello.txt' })).stdout, 'hello\n');

    const listed = await ok(client, 'sandbox_list', { metadata: { by: 'mcp' } });
    const ids = listed.sandboxes.map((s) => s.sandbox_id);
    assert.ok(ids.includes(id) && ids.includes(child), JSON.stringify(listed));
    await ok(client, 'sandbox_kill', { sandbox_id: child });
    const r = await rest('DELETE', `/v1/snapshots/${snap.snapshot_id}`);
    assert.equal(r.status, 204);
  } finally {
    const k = await ok(client, 'sandbox_kill', { sandbox_id: id });
    assert.equal(k.killed, true);
  }
  const gone = await ok(client, 'sandbox_list', {});
  assert.ok(!gone.sandboxes.some((s) => s.sandbox_id === id));
  const again = await fails(client, 'sandbox_kill', { sandbox_id: id });
  assert.equal(again.code, 'not_found');
}

// Calls run side by side, and a call the client gives up on (AbortSignal: the SDK sends
// notifications/cancelled) has its command killed.
async function sideBySideAndCancelled(client) {
  const { sandbox_id } = await ok(client, 'sandbox_create', {});
  try {
    const ac = new AbortController();
    const slow = client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id, command: 'sleep 30; touch /tmp/cancelled' } },
      undefined, { signal: ac.signal });
    const t0 = Date.now();
    const [a, b] = await Promise.all([
      ok(client, 'sandbox_exec', { sandbox_id, command: 'sleep 1; echo a' }),
      ok(client, 'sandbox_exec', { sandbox_id, command: 'sleep 1; echo b' }),
    ]);
    assert.deepEqual([a.stdout, b.stdout], ['a\n', 'b\n']);
    assert.ok(Date.now() - t0 < 1900, `side by side: ${Date.now() - t0} ms`);
    ac.abort('the test gives up');
    await assert.rejects(slow);
    const count = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 30' || true";
    let left;
    for (let i = 0; i < 50; i++) {
      left = (await ok(client, 'sandbox_exec', { sandbox_id, command: count })).stdout;
      if (left === '0\n') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(left, '0\n', 'the cancelled command is killed');
  } finally {
    await ok(client, 'sandbox_kill', { sandbox_id });
  }
}

async function listsTheTable(client) {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), TOOLS);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(typeof t.description, 'string');
    assert.equal(typeof t.annotations.readOnlyHint, 'boolean', t.name);
    assert.equal(typeof t.annotations.destructiveHint, 'boolean', t.name);
  }
  assert.equal(tools.find((t) => t.name === 'sandbox_list').annotations.readOnlyHint, true);
  assert.equal(tools.find((t) => t.name === 'sandbox_kill').annotations.destructiveHint, true);
  assert.deepEqual(tools.find((t) => t.name === 'sandbox_exec').inputSchema.required, ['sandbox_id', 'command']);
}

async function errorsAsMcpErrors(client) {
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }),
    (e) => e.code === -32602 && /unknown tool/.test(e.message));
  const missing = await client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: 'x' } });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, /`command` is required/);
  const wrong = await client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: 'x', command: 5 } });
  assert.equal(wrong.isError, true);
  assert.match(wrong.content[0].text, /`command` must be a string/);
  const extra = await client.callTool({ name: 'sandbox_list', arguments: { bogus: 1 } });
  assert.equal(extra.isError, true);
  assert.match(extra.content[0].text, /unknown argument `bogus`/);
  const nosb = await client.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: 'nope', command: 'true' } });
  assert.equal(nosb.isError, true);
  assert.equal(nosb.structuredContent.code, 'not_found');
  assert.equal(nosb.structuredContent.status, 404);
  await client.ping();
}

describe('mcp', { skip }, () => {
  before(async () => {
    d = new Daemon('mcp');
    d.extraArgs = ['--mcp-origin', ALLOWED_ORIGIN];
    linkTemplates(d);
    await d.start();
    keyA = await d.key('mcp-a');
    keyB = await d.key('mcp-b');
  });
  after(async () => {
    const left = await d.stop();
    assert.ok(isClean(left), `left behind: ${JSON.stringify(left)}`);
    assert.ok(!d.failure, d.failure);
  });

  describe('Streamable HTTP', () => {
    let c;
    before(async () => { c = await httpClient(keyA); });
    after(async () => {
      await c.transport.terminateSession(); // DELETE /mcp
      await c.client.close();
    });

    test('initialize negotiates 2025-11-25', () => {
      assert.equal(c.transport.protocolVersion, '2025-11-25');
      assert.equal(c.client.getServerVersion().name, 'warren');
      assert.deepEqual(c.client.getServerCapabilities().tools, { listChanged: false });
      assert.ok(c.transport.sessionId, 'an Mcp-Session-Id');
    });
    test('lists the tool table', () => listsTheTable(c.client));
    test('errors come as MCP errors', () => errorsAsMcpErrors(c.client));
    test('every sandbox tool, create to kill', () => lifecycle(c.client));
    test('calls side by side; a cancelled call\'s command is killed', () => sideBySideAndCancelled(c.client));

    test('a foreign team\'s sandbox is invisible', async () => {
      const mine = await ok(c.client, 'sandbox_create', {});
      const other = await httpClient(keyB);
      try {
        const seen = await ok(other.client, 'sandbox_list', {});
        assert.ok(!seen.sandboxes.some((s) => s.sandbox_id === mine.sandbox_id));
        for (const [name, args] of [['sandbox_exec', { command: 'true' }], ['sandbox_read_file', { path: '/etc/hostname' }],
          ['sandbox_kill', {}], ['sandbox_pause', {}], ['sandbox_port_url', { port: 80 }], ['sandbox_fork', {}]]) {
          const r = await fails(other.client, name, { sandbox_id: mine.sandbox_id, ...args });
          assert.equal(r.code, 'not_found', name);
        }
        assert.equal((await ok(c.client, 'sandbox_exec', { sandbox_id: mine.sandbox_id, command: 'echo still' })).stdout, 'still\n');
      } finally {
        await other.client.close();
        await ok(c.client, 'sandbox_kill', { sandbox_id: mine.sandbox_id });
      }
    });

    test('a bad key is refused (401) and the client throws', async () => {
      for (const key of ['wr_bogus', null]) {
        await assert.rejects(httpClient(key), (e) => e.code === 401, `key ${key}`);
      }
      const r = await fetch(`${d.url}/mcp`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer wr_bogus' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
      assert.equal(r.status, 401);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="warren"');
      const j = await r.json();
      assert.equal(j.jsonrpc, '2.0');
      assert.equal(j.id, null);
      assert.equal(typeof j.error.code, 'number');
      for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-authorization-server']) {
        assert.equal((await fetch(`${d.url}${p}`)).status, 404, p);
      }
    });

    test('Origin is checked', async () => {
      await assert.rejects(httpClient(keyA, { origin: 'https://evil.example' }), (e) => e.code === 403);
      await assert.rejects(httpClient(keyA, { origin: 'null' }), (e) => e.code === 403);
      const good = await httpClient(keyA, { origin: ALLOWED_ORIGIN });
      await good.client.ping();
      await good.client.close();
    });
  });

  describe('stdio (warren mcp)', () => {
    let c, stderr = '';
    before(async () => {
      c = await stdioClient(keyA);
      c.transport.stderr.on('data', (b) => { stderr += b; });
    });
    after(async () => { await c.client.close(); });

    test('initialize, tools and errors', async () => {
      assert.equal(c.client.getServerVersion().name, 'warren');
      await listsTheTable(c.client);
      await errorsAsMcpErrors(c.client);
    });
    test('every sandbox tool, create to kill', () => lifecycle(c.client));
    test('calls side by side; a cancelled call\'s command is killed', () => sideBySideAndCancelled(c.client));
    test('a bad key fails the initialize with the daemon\'s 401', async () => {
      await assert.rejects(stdioClient('wr_bogus'), /API key is not valid/);
    });
    test('a foreign team\'s sandbox is invisible', async () => {
      const mine = await ok(c.client, 'sandbox_create', {});
      const other = await stdioClient(keyB);
      try {
        assert.ok(!(await ok(other.client, 'sandbox_list', {})).sandboxes.some((s) => s.sandbox_id === mine.sandbox_id));
        assert.equal((await fails(other.client, 'sandbox_exec', { sandbox_id: mine.sandbox_id, command: 'true' })).code, 'not_found');
      } finally {
        await other.client.close();
        await ok(c.client, 'sandbox_kill', { sandbox_id: mine.sandbox_id });
      }
    });
  });

  // Tools over the code interpreter, the diff and the desktop. Their endpoints are the daemon's
  // own: a missing one fails. A test template that was not built (test.sh builds it) skips its
  // test, except under CI (CI=true), where it fails.
  describe('tools over other endpoints', () => {
    let c;
    before(async () => { c = await httpClient(keyA); });
    after(async () => { await c.client.close(); });

    function built(t, name) {
      if (templateAvailable(name)) return true;
      const why = `no ${name} template (test.sh builds it)`;
      if (process.env.CI === 'true') throw new Error(why);
      t.skip(why);
      return false;
    }

    test('run_code', async (t) => {
      if (!built(t, 'code-interpreter-v1')) return;
      const r = await c.client.callTool({ name: 'run_code', arguments: { code: 'x = 40\nprint("out")\nx + 2' } });
      assert.equal(r.isError, false, JSON.stringify(r));
      const s = r.structuredContent;
      try {
        assert.equal(s.sandbox_created, true);
        assert.equal(s.stdout, 'out\n');
        assert.equal(s.results.find((x) => x.is_main_result).text, '42');
        const again = await ok(c.client, 'run_code', { sandbox_id: s.sandbox_id, code: 'x * 2' });
        assert.equal(again.results[0].text, '80');
        const boom = await fails(c.client, 'run_code', { sandbox_id: s.sandbox_id, code: '1/0' });
        assert.equal(boom.error.name, 'ZeroDivisionError');
      } finally {
        await ok(c.client, 'sandbox_kill', { sandbox_id: s.sandbox_id });
      }
    });

    test('sandbox_diff', async () => {
      const sb = await ok(c.client, 'sandbox_create', {});
      try {
        await ok(c.client, 'sandbox_write_file', { sandbox_id: sb.sandbox_id, path: '/home/user/mcp-diff', content: 'x\n' });
        const r = await c.client.callTool({ name: 'sandbox_diff', arguments: { sandbox_id: sb.sandbox_id } });
        assert.equal(r.isError, false, JSON.stringify(r));
        assert.ok(r.structuredContent.changes.some((ch) => ch.path === '/home/user/mcp-diff' && ch.change === 'added'));
        const one = await ok(c.client, 'sandbox_diff', { sandbox_id: sb.sandbox_id, path: '/home/user/mcp-diff' });
        assert.match(one.diff, /\+x/);
      } finally {
        await ok(c.client, 'sandbox_kill', { sandbox_id: sb.sandbox_id });
      }
    });

    test('desktop_screenshot and desktop_action', async (t) => {
      if (!built(t, 'desktop')) return;
      const id = (await ok(c.client, 'sandbox_create', { template: 'desktop' })).sandbox_id;
      try {
        const shot = await c.client.callTool({ name: 'desktop_screenshot', arguments: { sandbox_id: id } });
        assert.equal(shot.isError, false, JSON.stringify(shot).slice(0, 500));
        assert.equal(shot.content[0].type, 'image');
        assert.equal(shot.content[0].mimeType, 'image/png');
        const moved = await ok(c.client, 'desktop_action', { sandbox_id: id, action: 'move', x: 10, y: 20 });
        assert.deepEqual([moved.x, moved.y], [10, 20]);
        await ok(c.client, 'desktop_action', { sandbox_id: id, action: 'key', keys: ['ctrl', 'l'] });
      } finally {
        await ok(c.client, 'sandbox_kill', { sandbox_id: id });
      }
    });
  });
});
