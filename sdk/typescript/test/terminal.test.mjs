// SPDX-License-Identifier: Apache-2.0
// sb.terminal(): a PTY over the terminal's WebSocket (the standard WebSocket: Node 20 runs this
// file with --experimental-websocket), its key named in the subprotocols as a browser's must be
// (docs/console.md); and version()'s team and admin, which the console signs in with.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as W from '../dist/index.mjs';
import { Daemon, isClean, unavailable } from './harness.mjs';

const skip = unavailable() ?? (typeof WebSocket === 'function' ? undefined : 'no global WebSocket (node --experimental-websocket)');
const { Sandbox, Client } = W;

/** Resolve with the output once it matches re (or reject after ms). */
function until(out, re, ms = 15_000) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = () => {
      const s = Buffer.concat(out).toString();
      if (re.test(s)) resolve(s);
      else if (Date.now() - t0 > ms) reject(new Error(`no ${re} in ${JSON.stringify(s)}`));
      else setTimeout(tick, 20);
    };
    tick();
  });
}

describe('terminal', { skip, concurrency: false }, () => {
  let d, client, sb;
  before(async () => {
    d = await new Daemon('term').start();
    client = new Client({ apiUrl: d.url, apiKey: await d.key('team-term') });
    sb = await Sandbox.create({ client, timeout: 300 });
  });
  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('says whose the key is', async () => {
    const v = await client.version();
    assert.equal(v.team, 'team-term');
    assert.equal(v.admin, false);
    const a = await new Client({ apiUrl: d.url, apiKey: d.adminKey }).version();
    assert.equal(a.admin, true);
  });

  it('types into a shell and reads its output, resizes, and sees it exit', async () => {
    const out = [];
    let exitSeen;
    const term = await sb.terminal({ rows: 30, cols: 100, onData: (b) => out.push(Buffer.from(b)), onExit: (e) => { exitSeen = e; } });
    assert.equal(term.open, true);
    term.write('echo hi-$((40+2))\n');
    await until(out, /hi-42/);
    term.resize(40, 120);
    term.write(new TextEncoder().encode('stty size\n'));
    await until(out, /40 120/);
    term.write('exit 3\n');
    const e = await term.exited;
    assert.equal(e.exitCode, 3);
    assert.deepEqual(exitSeen, e);
    assert.equal(term.open, false);
    term.write('ignored after the end');
  });

  it('runs a command with its size, and close() ends it', async () => {
    const out = [];
    const term = await sb.terminal({ cmd: 'stty size; cat', rows: 7, cols: 33, onData: (b) => out.push(Buffer.from(b)) });
    await until(out, /7 33/);
    term.close();
    const e = await term.exited;
    assert.equal(e.exitCode, undefined);
  });

  it("refuses with the API's error", async () => {
    await assert.rejects(Sandbox.connect('nope', { client }).then(() => {}), W.NotFoundError);
    const gone = new Sandbox('sb-nope', client);
    await assert.rejects(gone.terminal(), W.NotFoundError);
    const bad = new Sandbox(sb.id, new Client({ apiUrl: d.url, apiKey: 'wr_' + '0'.repeat(64) }));
    await assert.rejects(bad.terminal(), W.AuthenticationError);
    // Another team's key finds no such sandbox.
    const other = new Sandbox(sb.id, new Client({ apiUrl: d.url, apiKey: await d.key('team-other') }));
    await assert.rejects(other.terminal(), W.NotFoundError);
    // A paused sandbox answers 409.
    const p = await Sandbox.create({ client });
    await p.pause();
    await assert.rejects(p.terminal(), W.ConflictError);
    await p.kill();
    await assert.rejects(sb.terminal({ rows: 0 }), RangeError);
    await assert.rejects(new Sandbox(sb.id, new Client({ apiUrl: d.unixUrl })).terminal(), TypeError);
    await assert.rejects(new Sandbox(sb.id, new Client({ apiUrl: d.url, apiKey: 'has space' })).terminal(), TypeError);
  });
});
