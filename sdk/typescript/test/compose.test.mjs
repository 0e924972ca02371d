// SPDX-License-Identifier: Apache-2.0
// Compose files through the SDK (docs/compose.md), against a real warrend: a sandbox made from a
// file with two services of the base template (one waits for the other's healthcheck), its
// services and their logs, commands and files inside a service, the context read from a
// directory, and a refused key.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as W from '../dist/index.mjs';
import { Daemon, isClean, unavailable } from './harness.mjs';

const { Sandbox, Client } = W;

const COMPOSE = `services:
  web:
    image: base
    command: ["python3", "-m", "http.server", "8080"]
    ports: ["8080"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080')"]
      interval: 200ms
  client:
    image: base
    command: ["sh", "-c", "sleep 1000"]
    environment:
      GREETING: \${GREETING}
    env_file: client.env
    depends_on:
      web:
        condition: service_healthy
`;

/** Poll sb.services() until ok(services by name) holds, at most ms milliseconds. */
async function waitServices(sb, ok, ms = 30_000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = Object.fromEntries((await sb.services()).map((s) => [s.name, s]));
    if (ok(last)) return last;
    if (Date.now() > end) throw new Error(`services not ready after ${ms} ms: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('compose', { skip: unavailable(), concurrency: false }, () => {
  let d, client, ctx, sb;
  before(async () => {
    d = await new Daemon('cmp').start();
    client = new Client({ apiUrl: d.url, apiKey: await d.key('team-cmp') });
    ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'tssdk-compose-'));
    fs.writeFileSync(path.join(ctx, 'client.env'), 'FROM_FILE=yes\n');
    fs.mkdirSync(path.join(ctx, '.git'));
    fs.writeFileSync(path.join(ctx, '.git', 'HEAD'), 'ref: refs/heads/main\n');
    fs.mkdirSync(path.join(ctx, 'empty'));
  });
  after(async () => {
    if (ctx) fs.rmSync(ctx, { recursive: true, force: true });
    if (sb) await sb.kill().catch(() => false);
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('reads a context from a directory', async () => {
    const c = await W.composeContext(ctx);
    assert.deepEqual(c, { 'client.env': 'FROM_FILE=yes\n', 'empty/': '' });
    fs.writeFileSync(path.join(ctx, 'empty', 'bad.bin'), Buffer.from([0xff, 0xfe]));
    await assert.rejects(W.composeContext(ctx), (e) => e instanceof RangeError && /bad\.bin is not UTF-8/.test(e.message));
    fs.rmSync(path.join(ctx, 'empty', 'bad.bin'));
  });

  it('starts the services in order and lists them', async () => {
    sb = await Sandbox.create({
      client, timeout: 300,
      compose: { file: COMPOSE, env: { GREETING: 'hello' }, context: await W.composeContext(ctx) },
    });
    assert.equal(sb.info.state, 'running');
    const s = await waitServices(sb, (x) => x.web?.state === 'healthy' && x.client?.state === 'running');
    assert.deepEqual((await sb.services()).map((x) => x.name), ['web', 'client']);
    assert.equal(s.web.image, 'base');
    assert.deepEqual(s.web.ports, [8080]);
    assert.ok(Number.isInteger(s.web.pid) && s.web.pid > 0, JSON.stringify(s.web));
    assert.equal(s.web.restarts, 0);
    assert.equal(s.web.exitCode, undefined);
    assert.equal(s.client.raw.name, 'client');
  });

  it('runs commands inside a service', async () => {
    // The service's environment: interpolated from env, and read from the context's env_file.
    const env = await sb.commands.run('echo "$GREETING $FROM_FILE"', { service: 'client' });
    assert.equal(env.stdout, 'hello yes\n');
    // One network namespace: the client reaches the web service on loopback.
    const got = await sb.commands.run(['python3', '-c', "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8080').status)"], { service: 'client' });
    assert.equal(got.stdout, '200\n');
    // Streamed and background runs carry the service too.
    let streamed = '';
    await sb.commands.run('echo "$FROM_FILE"', { service: 'client', onStdout: (t) => { streamed += t; } });
    assert.equal(streamed, 'yes\n');
    const h = await sb.commands.run('echo "$GREETING"', { service: 'client', background: true });
    assert.equal((await h.wait()).stdout, 'hello\n');
  });

  it('reads and writes files in a service root', async () => {
    await sb.files.write('/tmp/proof.txt', 'in client\n', { service: 'client' });
    assert.equal(await sb.files.read('/tmp/proof.txt', { service: 'client' }), 'in client\n');
    assert.equal((await sb.commands.run('cat /tmp/proof.txt', { service: 'client' })).stdout, 'in client\n');
    // Each service has a root of its own.
    assert.equal(await sb.files.exists('/tmp/proof.txt', { service: 'web' }), false);
    const r = await sb.commands.run('cat /tmp/proof.txt', { service: 'web', check: false });
    assert.notEqual(r.exitCode, 0);
    assert.equal((await sb.files.getInfo('/tmp/proof.txt', { service: 'client' })).size, 10);
    assert.equal(await sb.files.makeDir('/tmp/d', { service: 'client' }), true);
    await sb.files.rename('/tmp/proof.txt', '/tmp/d/moved.txt', { service: 'client' });
    assert.deepEqual((await sb.files.list('/tmp/d', { service: 'client' })).map((e) => e.name), ['moved.txt']);
    await sb.files.remove('/tmp/d', { service: 'client', recursive: true });
    assert.equal(await sb.files.exists('/tmp/d', { service: 'client' }), false);
  });

  it('gives a service its log', async () => {
    // http.server logs every request (the healthchecks') on stderr.
    const log = await sb.serviceLogs('web');
    assert.equal(typeof log, 'string');
    assert.match(log, /"GET \/ HTTP\/1\.1" 200/);
    const bytes = await sb.serviceLogs('web', { format: 'bytes' });
    assert.ok(bytes instanceof Uint8Array && bytes.length > 0);
    assert.match(new TextDecoder().decode(bytes), /"GET \/ HTTP\/1\.1" 200/);
    await assert.rejects(sb.serviceLogs('nope'), W.NotFoundError);
    assert.equal(typeof (await sb.serviceLogs('client')), 'string');
    assert.equal(await sb.kill(), true);
    sb = undefined;
  });

  it('refuses a key it does not support, naming it and its line', async () => {
    const bad = 'services:\n  web:\n    image: base\n    privileged: true\n';
    await assert.rejects(Sandbox.create({ client, compose: bad }), (e) => {
      assert.ok(e instanceof W.UnsupportedError, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'unsupported');
      assert.equal(e.status, 400);
      assert.match(e.message, /services\.web\.privileged \(line 4\)/);
      return true;
    });
    await assert.rejects(Sandbox.create({ client, compose: { file: 'services: {}\n', bogus: 1 } }), TypeError);
  });

  it('a sandbox without a Compose file has no services', async () => {
    const plain = await Sandbox.create({ client });
    assert.deepEqual(await plain.services(), []);
    await plain.kill();
  });
});
