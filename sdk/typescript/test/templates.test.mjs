// SPDX-License-Identifier: Apache-2.0
// Template builds with progress (a Dockerfile's text, and a context directory tarred by the
// SDK), their errors, and the template calls, against a real warrend.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import * as W from '../dist/index.mjs';
import { Daemon, isClean, unavailable } from './harness.mjs';

describe('templates', { skip: unavailable(), concurrency: false }, () => {
  let d, client, ctx;
  before(async () => {
    d = await new Daemon('tpl').start();
    client = new W.Client({ apiUrl: d.url, apiKey: await d.key('team-tpl') });
    ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'tssdk-ctx-'));
    fs.writeFileSync(path.join(ctx, 'Dockerfile'), 'FROM base\nUSER root\nCOPY app /opt/app\nRUN cat /opt/app/long-name-* > /opt/sum\n');
    fs.mkdirSync(path.join(ctx, 'app', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(ctx, 'app', 'sub', 'x.txt'), 'x\n');
    fs.writeFileSync(path.join(ctx, 'app', 'long-name-' + 'n'.repeat(120)), 'long\n');
    fs.writeFileSync(path.join(ctx, 'app', 'big.bin'), Buffer.alloc(700_000, 7));
    fs.symlinkSync('sub/x.txt', path.join(ctx, 'app', 'link'));
  });
  after(async () => {
    fs.rmSync(ctx, { recursive: true, force: true });
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('builds from a Dockerfile with progress', async () => {
    const steps = [], out = [];
    const t = await W.Template.build('ts-tools', {
      client, dockerfile: 'FROM base\nUSER root\nENV GREETING=hi\nRUN echo building; echo warn >&2; echo $GREETING > /greeting\n',
      onStep: (s) => steps.push(s), onOutput: (stream, text) => out.push([stream, text]),
    });
    assert.ok(t instanceof W.Template);
    assert.equal(t.name, 'ts-tools');
    assert.equal(t.kind, 'template');
    assert.ok(t.layers >= 1);
    assert.deepEqual(steps.map((s) => [s.step, s.of, s.line]), [[1, 4, 1], [2, 4, 2], [3, 4, 3], [4, 4, 4]]);
    assert.match(steps[3].instruction, /^RUN echo building/);
    assert.ok(out.some(([s, x]) => s === 'stdout' && x.includes('building')), JSON.stringify(out));
    assert.ok(out.some(([s, x]) => s === 'stderr' && x.includes('warn')));
    const again = [];
    await W.Template.build('ts-tools', { client, replace: true, dockerfile: 'FROM base\nUSER root\nENV GREETING=hi\nRUN echo building; echo warn >&2; echo $GREETING > /greeting\n', onStep: (s) => again.push(s) });
    assert.equal(again.at(-1).cached, true);
    const sb = await W.Sandbox.create({ client, template: t });
    assert.equal(await sb.files.read('/greeting'), 'hi\n');
    await sb.kill();
    assert.ok((await W.Template.list({ client })).some((x) => x.name === 'ts-tools'));
    assert.equal((await W.Template.get('ts-tools', { client })).name, 'ts-tools');
  });

  it('builds from a context directory (tarred as it is sent)', async () => {
    const t = await W.Template.build('ts-app', { client, context: ctx });
    const sb = await W.Sandbox.create({ client, template: t.name });
    assert.equal(await sb.files.read('/opt/sum'), 'long\n');
    assert.equal(await sb.files.read('/opt/app/sub/x.txt'), 'x\n');
    assert.equal((await sb.files.getInfo('/opt/app/big.bin')).size, 700_000);
    const link = await sb.files.getInfo('/opt/app/link');
    assert.equal(link.type, 'symlink');
    assert.equal(link.link, 'sub/x.txt');
    await sb.kill();
    // The Dockerfile given as text replaces the context's.
    const t2 = await W.Template.build('ts-app2', { client, context: ctx, dockerfile: 'FROM base\nCOPY app/sub /s\n' });
    const sb2 = await W.Sandbox.create({ client, template: t2 });
    assert.equal(await sb2.files.read('/s/x.txt'), 'x\n');
    assert.equal(await sb2.files.exists('/opt/sum'), false);
    await sb2.kill();
    // A context given as a tar archive's bytes.
    const { tarDirectory } = createRequire(import.meta.url)('../dist/tar.cjs');
    const parts = [];
    for await (const c of tarDirectory(ctx, 'FROM base\nCOPY app/sub/x.txt /x\n')) parts.push(Buffer.from(c));
    const t3 = await W.Template.build('ts-app3', { client, context: new Uint8Array(Buffer.concat(parts)) });
    const sb3 = await W.Sandbox.create({ client, template: t3 });
    assert.equal(await sb3.files.read('/x'), 'x\n');
    await sb3.kill();
  });

  it('throws BuildError and the API errors', async () => {
    const e = await W.Template.build('ts-bad', { client, dockerfile: 'FROM base\nRUN echo fine\nRUN exit 3\n' }).then(() => null, (x) => x);
    assert.ok(e instanceof W.BuildError, String(e));
    assert.equal(e.step, 3);
    assert.equal(e.line, 3);
    assert.equal(e.exitCode, 3);
    await assert.rejects(W.Template.build('ts-bad', { client, dockerfile: 'FROM base\nADD x /x\n' }), (x) => x instanceof W.InvalidArgumentError && /line 2/.test(x.message));
    await assert.rejects(W.Template.build('ts-bad', { client, dockerfile: 'FROM no-such-base\n' }), W.NotFoundError);
    await assert.rejects(W.Template.build('ts-tools', { client, dockerfile: 'FROM base\n' }), W.ConflictError);
    await assert.rejects(W.Template.build('base', { client, dockerfile: 'FROM base\n', replace: true }), /shared template/);
    await assert.rejects(W.Template.build('x', { client }), TypeError);
  });

  it('imports a docker-archive from a path, streamed', async () => {
    // A docker-archive made here: one layer (a tar of a directory, by the SDK's own tar writer),
    // its config with the layer's digest, and manifest.json.
    const { tarDirectory } = createRequire(import.meta.url)('../dist/tar.cjs');
    const collect = async (it) => { const parts = []; for await (const c of it) parts.push(Buffer.from(c)); return Buffer.concat(parts); };
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tssdk-img-'));
    try {
      fs.mkdirSync(path.join(work, 'root', 'etc'), { recursive: true });
      fs.writeFileSync(path.join(work, 'root', 'etc', 'imported'), 'from an archive\n');
      const layer = await collect(tarDirectory(path.join(work, 'root')));
      const arch = path.join(work, 'arch');
      fs.mkdirSync(arch);
      fs.writeFileSync(path.join(arch, 'layer.tar'), layer);
      const diff = 'sha256:' + crypto.createHash('sha256').update(layer).digest('hex');
      const config = JSON.stringify({ architecture: 'amd64', os: 'linux', config: { Env: ['PATH=/usr/bin:/bin'], WorkingDir: '/etc' }, rootfs: { type: 'layers', diff_ids: [diff] } });
      const cfgName = crypto.createHash('sha256').update(config).digest('hex') + '.json';
      fs.writeFileSync(path.join(arch, cfgName), config);
      fs.writeFileSync(path.join(arch, 'manifest.json'), JSON.stringify([{ Config: cfgName, RepoTags: ['ts/imported:1'], Layers: ['layer.tar'] }]));
      const tarball = path.join(work, 'image.tar');
      fs.writeFileSync(tarball, await collect(tarDirectory(arch)));
      const t = await W.Template.importArchive(tarball, 'ts-imported', { client });
      assert.equal(t.name, 'ts-imported');
      assert.equal(t.layers, 1);
      assert.equal((await W.Template.get('ts-imported', { client })).kind, 'template');
      await assert.rejects(W.Template.importArchive(tarball, 'ts-imported', { client }), W.ConflictError);
      await W.Template.importArchive(fs.readFileSync(tarball), 'ts-imported', { client, replace: true });
      await assert.rejects(W.Template.importArchive(new TextEncoder().encode('not an archive'), 'ts-junk', { client }), W.BadContentError);
      await W.Template.delete('ts-imported', { client });
    } finally { fs.rmSync(work, { recursive: true, force: true }); }
  });

  it('deletes templates and prunes the cache', async () => {
    await W.Template.delete('ts-app2', { client });
    await assert.rejects(W.Template.get('ts-app2', { client }), W.NotFoundError);
    await assert.rejects(W.Template.delete('base', { client }), W.ConflictError);
    assert.ok(await W.Template.pruneCache({ client }) >= 1);
  });
});
