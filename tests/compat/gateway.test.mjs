// SPDX-License-Identifier: Apache-2.0
// e2b@2.51.0, unchanged, against a gateway in front of two node daemons (docs/deploy.md): the
// SDK's API and envd calls go to the gateway, which places creates and routes each sandbox's
// requests (E2b-Sandbox-Id, <port>-<id>.<domain>) to the node that holds it.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import * as sdk from 'e2b';

import { baseAvailable, Cluster, isClean } from './harness.mjs';

const { Sandbox, NotFoundError } = sdk;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const skip = baseAvailable() ? false : 'no base template (WARREN_BASE_TEMPLATE): run ./test.sh';
if (skip && process.env.CI === 'true') throw new Error(skip);

describe('e2b-2.51 through a gateway', { skip, concurrency: false }, () => {
  let c, keyA, keyB;
  const opts = () => ({ apiKey: keyA });

  // The node a sandbox is on, as the gateway's native API says.
  async function nodeOf(id) {
    const r = await fetch(`${c.url}/v1/sandboxes/${id}`, { headers: { Authorization: `Bearer ${keyA}` } });
    assert.equal(r.status, 200);
    return (await r.json()).node;
  }

  before(async () => {
    c = await new Cluster('gw').start();
    keyA = await c.key('gw-a');
    keyB = await c.key('gw-b');
    process.env.E2B_API_URL = c.url;
    process.env.E2B_SANDBOX_URL = c.url;
    process.env.E2B_API_KEY = keyA;
    process.env.E2B_DOMAIN = 'warren.test';
  });

  after(async () => {
    if (!c) return;
    const left = await c.stop();
    assert.ok(isClean(left), `left behind: ${JSON.stringify(left)}`);
    assert.equal(c.failure, undefined);
  });

  test('creates are placed on both nodes; commands, files, list, another team', async () => {
    const boxes = [];
    try {
      for (let i = 0; i < 4; i++)
        boxes.push(await Sandbox.create('base', { ...opts(), metadata: { i: String(i) }, timeoutMs: 120_000 }));
      const nodes = new Set();
      for (const b of boxes) nodes.add(await nodeOf(b.sandboxId));
      assert.deepEqual([...nodes].sort(), ['n1', 'n2']);
      const b = boxes[0];
      assert.equal((await b.commands.run('echo hi; hostname')).stdout, `hi\n${b.sandboxId}\n`);
      await b.files.write('/home/user/a.txt', 'through the gateway');
      assert.equal(await b.files.read('/home/user/a.txt'), 'through the gateway');
      const listed = await Sandbox.list({ ...opts(), query: { metadata: { i: '2' } } }).nextItems();
      assert.deepEqual(listed.map((x) => x.sandboxId), [boxes[2].sandboxId]);
      await assert.rejects(Sandbox.connect(b.sandboxId, { apiKey: keyB }),
        (e) => e instanceof NotFoundError);
    } finally {
      for (const b of boxes) await b.kill();
    }
  });

  test('pause, pause to disk, connect; getHost; kill', async () => {
    let sbx = await Sandbox.create('base', { ...opts(), timeoutMs: 120_000 });
    await sbx.files.write('/home/user/kept.txt', 'kept');
    await sbx.pause();
    assert.equal((await sbx.getInfo()).state, 'paused');
    sbx = await Sandbox.connect(sbx.sandboxId, opts());
    assert.equal(await sbx.files.read('/home/user/kept.txt'), 'kept');
    assert.equal(await sbx.pause({ keepMemory: false }), true);
    sbx = await Sandbox.connect(sbx.sandboxId, opts());
    assert.equal((await sbx.commands.run('cat /home/user/kept.txt')).stdout, 'kept');

    await sbx.commands.run(
      'python3 -c "import http.server as h; h.HTTPServer((\'0.0.0.0\', 8124), h.SimpleHTTPRequestHandler).serve_forever()"',
      { background: true, cwd: '/home/user' });
    const host = sbx.getHost(8124);
    const get = () => new Promise((resolve, reject) => {
      const r = http.get({ host: '127.0.0.1', port: c.port, path: '/kept.txt', headers: { Host: host } },
        (res) => { let b = ''; res.on('data', (d) => { b += d; }); res.on('end', () => resolve([res.statusCode, b])); });
      r.on('error', reject);
    });
    let st, body;
    for (let i = 0; i < 200; i++) {
      [st, body] = await get();
      if (st === 200) break;
      await sleep(50);
    }
    assert.equal(st, 200);
    assert.equal(body, 'kept');

    const id = sbx.sandboxId;
    assert.notEqual(await sbx.kill(), false);
    await assert.rejects(Sandbox.getInfo(id, opts()), (e) => e instanceof NotFoundError);
  });
});
