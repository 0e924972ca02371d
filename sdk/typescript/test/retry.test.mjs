// SPDX-License-Identifier: Apache-2.0
// Retries against a real warrend at its capacity (--max-sandboxes 1: a create answers 503
// `limit` with Retry-After): a create is retried (it carries an Idempotency-Key) and succeeds
// once there is room, or gives up with RateLimitError; a POST without a key is never repeated.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as W from '../dist/index.mjs';
import { Daemon, isClean, unavailable } from './harness.mjs';

describe('Retry-After', () => {
  it('parses seconds and HTTP dates, capped', () => {
    assert.equal(W.parseRetryAfter('5'), 5);
    assert.equal(W.parseRetryAfter(' 1.5 '), 1.5);
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.equal(W.parseRetryAfter('Thu, 01 Jan 2026 00:00:07 GMT', now), 7);
    assert.equal(W.parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now), 0);
    assert.equal(W.parseRetryAfter('99999999'), 86400);
    assert.equal(W.parseRetryAfter('soon'), undefined);
    assert.equal(W.parseRetryAfter(null), undefined);
  });
  it('maps codes and statuses to classes', () => {
    const e = W.errorFromResponse(503, '{"code":"limit","message":"full"}', 'r1', '3');
    assert.ok(e instanceof W.RateLimitError);
    assert.equal(e.retryAfter, 3);
    assert.equal(e.requestId, 'r1');
    assert.ok(W.errorFromResponse(409, '{"code":"no_interpreter","message":"x"}') instanceof W.ConflictError);
    assert.ok(W.errorFromResponse(507, '{"code":"no_space","message":"x"}') instanceof W.NoSpaceError);
    assert.ok(W.errorFromResponse(502, '{"code":"start_failed","message":"x"}') instanceof W.SandboxError);
    const plain = W.errorFromResponse(500, 'boom\nmore');
    assert.ok(plain instanceof W.ServerError);
    assert.equal(plain.message, 'boom');
    assert.equal(plain.code, 'internal');
    assert.ok(W.errorFromResponse(418, '') instanceof W.WarrenError);
  });
});

describe('retries at capacity', { skip: unavailable(), concurrency: false }, () => {
  let d, key, first;
  before(async () => {
    d = await new Daemon('retry', ['--max-sandboxes', '1']).start();
    key = await d.key('team-retry');
    first = await W.Sandbox.create({ apiUrl: d.url, apiKey: key });
  });
  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('gives up with RateLimitError after its retries', async () => {
    const none = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 0 });
    const e = await W.Sandbox.create({ client: none }).then(() => null, (x) => x);
    assert.ok(e instanceof W.RateLimitError, String(e));
    assert.equal(e.status, 503);
    assert.equal(e.code, 'limit');
    assert.ok(e.retryAfter > 0);
    const two = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 2, maxRetryDelayMs: 300 });
    const t0 = Date.now();
    await assert.rejects(W.Sandbox.create({ client: two }), W.RateLimitError);
    const took = Date.now() - t0;
    assert.ok(took >= 550, `two waits of Retry-After capped at 300 ms, took ${took} ms`);
    assert.ok(took < 5000, `took ${took} ms`);
  });

  it('never repeats a POST without an Idempotency-Key', async () => {
    const c = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 3, maxRetryDelayMs: 1000 });
    const t0 = Date.now();
    await assert.rejects(c.request('POST', '/v1/sandboxes', { json: {} }), W.RateLimitError);
    assert.ok(Date.now() - t0 < 500, 'answered at once');
  });

  it('aborts while waiting to retry', async () => {
    const c = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 5 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const t0 = Date.now();
    await assert.rejects(W.Sandbox.create({ client: c, signal: ac.signal }), W.AbortError);
    assert.ok(Date.now() - t0 < 2000);
  });

  it('succeeds once there is room, making one sandbox', async () => {
    const c = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 20, maxRetryDelayMs: 200 });
    const pending = W.Sandbox.create({ client: c, metadata: { retried: '1' } });
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await first.kill(), true);
    const sb = await pending;
    assert.equal(sb.info.state, 'running');
    const ids = [];
    for await (const i of W.Sandbox.list({ client: c })) ids.push(i.id);
    assert.deepEqual(ids, [sb.id]);
    await sb.kill();
  });
});
