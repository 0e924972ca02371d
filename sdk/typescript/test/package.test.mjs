// SPDX-License-Identifier: Apache-2.0
// Packaging: `npm pack` makes a tarball that installs into an empty project (offline: the
// package has no dependencies), where both `import` and `require` load it, share one copy of
// every class (instanceof holds across them), and TypeScript finds its types in both module
// systems.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

describe('package', { concurrency: false }, () => {
  let tmp, tarball, proj, pkg;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tssdk-pack-'));
    const out = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', tmp], root));
    tarball = path.join(tmp, out[0].filename);
    pkg = out[0];
    proj = path.join(tmp, 'proj');
    fs.mkdirSync(proj);
    fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'consumer', private: true }));
    npm(['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], proj);
  });
  after(() => { if (tmp) fs.rmSync(tmp, { recursive: true, force: true }); });

  it('ships the build and nothing else', () => {
    const files = pkg.files.map((f) => f.path).sort();
    for (const f of ['dist/index.cjs', 'dist/index.d.cts', 'dist/index.mjs', 'dist/index.d.mts', 'package.json', 'README.md'])
      assert.ok(files.includes(f), `${f} in ${files}`);
    assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('test/') || f.startsWith('node_modules/')), String(files));
    const meta = JSON.parse(fs.readFileSync(path.join(proj, 'node_modules/@warren/sdk/package.json'), 'utf8'));
    assert.equal(meta.dependencies, undefined, 'no runtime dependencies');
    assert.equal(meta.sideEffects, false);
    assert.equal(meta.engines.node, '>=18');
    assert.deepEqual(Object.keys(meta.exports['.']), ['import', 'require']);
    assert.deepEqual(Object.keys(meta.exports['.'].import), ['types', 'default']);
    // Only the package itself was installed.
    assert.deepEqual(fs.readdirSync(path.join(proj, 'node_modules')).filter((n) => !n.startsWith('.')), ['@warren']);
  });

  it('loads with import and require, one copy of each class', () => {
    const script = `
      import * as esm from '@warren/sdk';
      import { createRequire } from 'node:module';
      const cjs = createRequire(import.meta.url)('@warren/sdk');
      const same = ['Sandbox', 'Client', 'WarrenError', 'NotFoundError', 'CommandExitError', 'Template'].every((n) => esm[n] === cjs[n]);
      const e = new esm.NotFoundError('not_found', 'x', 404);
      const r = new cjs.RateLimitError('limit', 'y', 503, 'rid', 2);
      console.log(JSON.stringify({
        same, keys: Object.keys(esm).length === Object.keys(cjs).length,
        a: e instanceof cjs.WarrenError, b: e instanceof cjs.NotFoundError, c: r instanceof esm.WarrenError,
        d: r instanceof esm.RateLimitError, name: e.name, ra: r.retryAfter, err: e instanceof Error,
      }));`;
    fs.writeFileSync(path.join(proj, 'check.mjs'), script);
    const got = JSON.parse(execFileSync(process.execPath, ['check.mjs'], { cwd: proj, encoding: 'utf8' }));
    assert.deepEqual(got, { same: true, keys: true, a: true, b: true, c: true, d: true, name: 'NotFoundError', ra: 2, err: true });
    const cjsOnly = execFileSync(process.execPath, ['-e', "const w = require('@warren/sdk'); console.log(typeof w.Sandbox.create, new w.Client({apiUrl: 'unix:///x.sock'}).apiUrl)"], { cwd: proj, encoding: 'utf8' });
    assert.equal(cjsOnly.trim(), 'function unix:///x.sock');
  });

  it('has types for both module systems', () => {
    const tsc = require.resolve('typescript/bin/tsc');
    const code = `import { Sandbox, CommandExitError, type CommandResult } from '@warren/sdk';
export async function f(): Promise<string> {
  const sb = await Sandbox.create({ template: 'base', timeout: 60 });
  const r: CommandResult = await sb.commands.run('true');
  const h = await sb.commands.run('sleep 1', { background: true });
  await h.wait();
  try { await sb.files.read('/x'); } catch (e) { if (e instanceof CommandExitError) return e.result.stdout; }
  // @ts-expect-error: a foreground run resolves to a result, not a handle
  (await sb.commands.run('true')).pid.toFixed;
  return r.stdout;
}
`;
    fs.writeFileSync(path.join(proj, 'a.mts'), code);
    fs.writeFileSync(path.join(proj, 'b.cts'), code);
    fs.writeFileSync(path.join(proj, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { module: 'node16', moduleResolution: 'node16', target: 'es2022', lib: ['es2022', 'dom'], strict: true, noEmit: true, types: [] },
      files: ['a.mts', 'b.cts'],
    }));
    execFileSync(process.execPath, [tsc, '-p', proj], { cwd: proj, encoding: 'utf8' });
  });
});
