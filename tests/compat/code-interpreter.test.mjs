// SPDX-License-Identifier: Apache-2.0
// @e2b/code-interpreter 2.8.0, unchanged, against a real warrend with the Debian
// `code-interpreter-v1` template (scripts/templates/code-interpreter-v1.sh): its calls to port
// 49999 (E2b-Sandbox-Port) go through the daemon's port proxy to warren-interp in the sandbox
// (src/interp/). The scenario of the research (agent-surfaces.md §1.8).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { NotFoundError, Sandbox, TimeoutError } from '@e2b/code-interpreter';

import { Daemon, isClean, templateAvailable } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const skip = templateAvailable('code-interpreter-v1')
  ? false : 'no code-interpreter-v1 test template: run ./test.sh (or scripts/build-base.sh)';
if (skip && process.env.CI === 'true') throw new Error(skip);

// The template's start command (config.json `start`) has the server up when the create
// answers. A daemon without start support (before the template start work lands) creates the
// sandbox without it: the server is started here through a background command then, and
// waited for. With start support this finds it up at once and starts nothing.
async function ensureServer(sbx) {
  const probe = 'curl -s -o /dev/null -w %{http_code} http://127.0.0.1:49999/health';
  const first = await sbx.commands.run(probe).catch((e) => e.result || { stdout: '' });
  if (first.stdout === '200') return true;
  await sbx.commands.run('/usr/lib/warren/warren-interp --port 49999', { background: true });
  const end = Date.now() + 60_000;
  for (;;) {
    const r = await sbx.commands.run(probe).catch((e) => e.result || { stdout: '' });
    if (r.stdout === '200') return false;
    if (Date.now() > end) throw new Error('warren-interp did not come up');
    await sleep(50);
  }
}

describe('@e2b/code-interpreter 2.8.0', { skip, concurrency: false }, () => {
  let d, sbx;

  before(async () => {
    d = await new Daemon('interp').start();
    process.env.E2B_API_URL = d.url;
    process.env.E2B_SANDBOX_URL = d.url;
    process.env.E2B_API_KEY = await d.key('interp');
    process.env.E2B_DOMAIN = 'warren.test';
  });

  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.ok(isClean(left), `left behind: ${JSON.stringify(left)}`);
    assert.equal(d.failure, undefined);
  });

  test('Sandbox.create() with the default template', async () => {
    sbx = await Sandbox.create({ timeoutMs: 300_000 });
    const info = await sbx.getInfo();
    assert.equal(info.templateId, 'code-interpreter-v1');
    const wasUp = await ensureServer(sbx);
    console.log(`# the server was ${wasUp ? 'up at create (template start)' : 'started by the test'}`);
    // A daemon with template start support (it has GET /v1/warm-pools) must have started it.
    const pools = await fetch(`${d.url}/v1/warm-pools`, { headers: { Authorization: `Bearer ${d.adminKey}` } });
    if (pools.status === 200) assert.equal(wasUp, true, 'the template start command did not run');
  });

  test('state across cells, the main result, executionCount', async () => {
    const a = await sbx.runCode('x = 40');
    assert.equal(a.error, undefined);
    const b = await sbx.runCode('x + 2');
    assert.equal(b.text, '42');
    assert.ok(b.executionCount > a.executionCount && a.executionCount > 0,
      `${a.executionCount} ${b.executionCount}`);
    assert.equal(b.results.length, 1);
    assert.equal(b.results[0].isMainResult, true);
  });

  test('stdout and stderr, with onStdout/onStderr as they come', async () => {
    const out = [], err = [];
    const e = await sbx.runCode(
      'import sys, time\nprint("one")\nsys.stdout.flush()\ntime.sleep(0.2)\nprint("two")\nprint("bad", file=sys.stderr)',
      { onStdout: (m) => out.push(m), onStderr: (m) => err.push(m) });
    assert.deepEqual(e.logs.stdout.join(''), 'one\ntwo\n');
    assert.deepEqual(e.logs.stderr, ['bad\n']);
    assert.deepEqual(out.map((m) => m.line).join(''), 'one\ntwo\n');
    assert.equal(err[0].line, 'bad\n');
    assert.ok(out[0].timestamp > 0, JSON.stringify(out[0]));
    assert.equal(err[0].error, true);
  });

  test('an exception: name, value, traceback', async () => {
    const e = await sbx.runCode('1/0');
    assert.equal(e.error.name, 'ZeroDivisionError');
    assert.equal(e.error.value, 'division by zero');
    assert.match(e.error.traceback, /ZeroDivisionError/);
    assert.equal(e.results.length, 0);
  });

  test('matplotlib: a PNG, not the main result', async () => {
    const e = await sbx.runCode(
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
    assert.equal(e.error, undefined, JSON.stringify(e.error));
    const png = e.results.find((r) => r.png);
    assert.ok(png, JSON.stringify(e.results.map((r) => r.formats())));
    assert.equal(png.isMainResult, false);
    assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG');
  });

  test('HTML and Markdown results', async () => {
    const e = await sbx.runCode(
      'from IPython.display import HTML, Markdown, display\ndisplay(Markdown("# hi"))\nHTML("<b>b</b>")');
    assert.equal(e.results[0].markdown, '# hi');
    assert.equal(e.results[1].html, '<b>b</b>');
    assert.equal(e.results[1].isMainResult, true);
  });

  test('envs for one call, quotes of text/plain stripped, then restored', async () => {
    const e = await sbx.runCode('import os; os.environ["FOO"]', { envs: { FOO: 'bar' } });
    assert.equal(e.text, 'bar');
    const after2 = await sbx.runCode('import os; os.environ.get("FOO", "unset")');
    assert.equal(after2.text, 'unset');
  });

  test('contexts: create with cwd, list, isolation, restart, remove', async () => {
    const ctx = await sbx.createCodeContext({ cwd: '/' });
    assert.equal(ctx.language, 'python');
    assert.equal(ctx.cwd, '/');
    const list = await sbx.listCodeContexts();
    assert.ok(list.some((c) => c.id === ctx.id), JSON.stringify(list));
    assert.equal((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text, '/');
    await sbx.runCode('only_here = 1', { context: ctx });
    const elsewhere = await sbx.runCode('only_here');
    assert.equal(elsewhere.error.name, 'NameError');
    assert.equal((await sbx.runCode('only_here', { context: ctx })).text, '1');
    await sbx.restartCodeContext(ctx);
    assert.equal((await sbx.runCode('only_here', { context: ctx })).error.name, 'NameError');
    await sbx.removeCodeContext(ctx.id);
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    // (A short requestTimeoutMs: the SDK leaves the request timer of a call answered non-2xx
    // running, and its default 60 s would hold the test process open that long.)
    await assert.rejects(sbx.runCode('1', { context: ctx, requestTimeoutMs: 5000 }), NotFoundError);
  });

  test('timeoutMs: TimeoutError, and the next cell runs promptly', async () => {
    await assert.rejects(sbx.runCode('import time; time.sleep(30)', { timeoutMs: 1000 }),
      TimeoutError);
    const t = Date.now();
    const e = await sbx.runCode('x + 1');
    assert.equal(e.text, '41');
    assert.ok(Date.now() - t < 5000, `the next cell took ${Date.now() - t} ms`);
  });

  test('JavaScript: language js, state, console, the value', async () => {
    await sbx.runCode('const base = 40', { language: 'js' });
    const e = await sbx.runCode('console.log("from js"); base + 2', { language: 'javascript' });
    assert.equal(e.text, '42');
    assert.deepEqual(e.logs.stdout, ['from js\n']);
    const err = await sbx.runCode('undefinedThing', { language: 'js' });
    assert.equal(err.error.name, 'ReferenceError');
  });

  test('an unsupported language is an error', async () => {
    await assert.rejects(sbx.runCode('1', { language: 'java', requestTimeoutMs: 5000 }), /500|unsupported/);
  });

  test('kill', async () => {
    await sbx.kill();
    assert.equal(await Sandbox.connect(sbx.sandboxId).then(() => 'found', () => 'gone'), 'gone');
  });
});
