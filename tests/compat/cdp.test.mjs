// SPDX-License-Identifier: Apache-2.0
// playwright-core 1.65.1, unchanged and without a browser download, drives Debian's Chromium in
// a sandbox of the `desktop` template over the Chrome DevTools Protocol, through warrend's
// GET /v1/sandboxes/{id}/cdp (a WebSocket proxied to the browser endpoint inside) and
// /cdp/json/version (its webSocketDebuggerUrl rewritten to that URL). The page comes from
// another port of the same sandbox (python3 -m http.server), which the browser inside reaches
// at 127.0.0.1. The sandbox has no internet.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { chromium } from 'playwright-core';

import { Daemon, isClean, templateAvailable } from './harness.mjs';

const skip = templateAvailable('desktop') ? false
  : 'no desktop template (test.sh builds it: scripts/templates/desktop.sh)';
if (skip && process.env.CI === 'true') throw new Error(skip);

describe('playwright-core connectOverCDP', { skip, concurrency: false }, () => {
  let d, key, id;
  const api = async (method, path, body) => {
    const r = await fetch(`${d.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, json: text ? JSON.parse(text) : null };
  };

  before(async () => {
    d = await new Daemon('cdp').start();
    key = await d.key('cdp');
    const r = await api('POST', '/v1/sandboxes',
      { template: 'desktop', timeout: 300, network: { enabled: false } });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    id = r.json.id;
  });

  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.ok(isClean(left), `left behind: ${JSON.stringify(left)}`);
    assert.equal(d.failure, undefined);
  });

  test('no browser yet: json/version answers 409 naming browser/start', async () => {
    const r = await api('GET', `/v1/sandboxes/${id}/cdp/json/version`);
    assert.equal(r.status, 409);
    assert.match(r.json.message, /browser\/start/);
  });

  test('a page served from another port of the sandbox, its title read over CDP', async () => {
    const page = '<!doctype html><title>served in the sandbox</title><h1 id=h>hi</h1>';
    let r = await api('POST', `/v1/sandboxes/${id}/exec`, {
      cmd: ['sh', '-c', 'mkdir -p /tmp/site && cat > /tmp/site/index.html'], stdin: page,
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    r = await api('POST', `/v1/sandboxes/${id}/exec`, {
      cmd: ['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1', '--directory', '/tmp/site'],
      mode: 'background',
    });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const t0 = Date.now();
    r = await api('POST', `/v1/sandboxes/${id}/browser/start`, {});
    assert.equal(r.status, 200, JSON.stringify(r.json));
    console.log(`# browser/start (headless Chromium, CDP answering): ${Date.now() - t0} ms`);
    assert.equal(r.json.cdp_url, `ws://127.0.0.1:${d.port}/v1/sandboxes/${id}/cdp`);

    const t1 = Date.now();
    const browser = await chromium.connectOverCDP(`${d.url}/v1/sandboxes/${id}/cdp`,
      { headers: { Authorization: `Bearer ${key}` } });
    console.log(`# connectOverCDP: ${Date.now() - t1} ms`);
    try {
      assert.match(browser.version(), /^\d+\./);
      const ctx = browser.contexts()[0] ?? await browser.newContext();
      const p = await ctx.newPage();
      await p.goto('http://127.0.0.1:8000/');
      assert.equal(await p.title(), 'served in the sandbox');
      assert.equal(await p.textContent('#h'), 'hi');
      // The browser inside has no way out: a name does not resolve.
      await assert.rejects(p.goto('http://example.com/', { timeout: 10000 }));
    } finally {
      await browser.close();
    }
  });

  test('the WebSocket URL itself also works, and needs the key', async () => {
    const ws = `ws://127.0.0.1:${d.port}/v1/sandboxes/${id}/cdp`;
    await assert.rejects(chromium.connectOverCDP(ws, { timeout: 5000 }), /401|Unexpected server response/);
    const browser = await chromium.connectOverCDP(ws, { headers: { Authorization: `Bearer ${key}` } });
    try {
      const p = await (browser.contexts()[0] ?? await browser.newContext()).newPage();
      await p.setContent('<title>inline</title>');
      assert.equal(await p.title(), 'inline');
    } finally {
      await browser.close();
    }
  });
});
