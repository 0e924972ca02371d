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

// A team's request rate on a real warrend (PUT /v1/teams/{team}/limits, docs/operations.md
// "Limits"): one request every 2 s, burst 1, so a second request at once answers 429 `limit`
// (reason `rate`) with Retry-After: 2. The SDK's backoff (250 ms, doubled) is far shorter, so
// only a client that waits the Retry-After gets through on its one retry.
describe('retries on a team rate limit (429)', { skip: unavailable(), concurrency: false }, () => {
  const team = 'team-rate';
  let d, key;
  before(async () => {
    d = await new Daemon('rate').start();
    key = await d.key(team);
    const r = await fetch(`${d.url}/v1/teams/${team}/limits`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${d.adminKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ requests: { rate: 0.5, burst: 1 } }),
    });
    assert.equal(r.status, 200, await r.text());
  });
  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  /** Spend the team's one token (plain fetch, no SDK): the bucket is then empty for 2 s. */
  async function spend() {
    const end = Date.now() + 10_000;
    for (;;) {
      const r = await fetch(`${d.url}/v1/sandboxes`, { headers: { Authorization: `Bearer ${key}` } });
      await r.arrayBuffer();
      if (r.status === 200) return;
      assert.equal(r.status, 429);
      assert.ok(Date.now() < end, 'the bucket never refilled');
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  it('gives up with RateLimitError 429 after its retries', async () => {
    await spend();
    const none = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 0 });
    const e = await W.Sandbox.list({ client: none }).next().then(() => null, (x) => x);
    assert.ok(e instanceof W.RateLimitError, String(e));
    assert.equal(e.status, 429);
    assert.equal(e.code, 'limit');
    assert.equal(e.retryAfter, 2);
    assert.match(e.message, /rate limit/);
    const two = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 2, maxRetryDelayMs: 300 });
    const t0 = Date.now();
    await assert.rejects(W.Sandbox.list({ client: two }).next(), W.RateLimitError);
    const took = Date.now() - t0;
    assert.ok(took >= 550, `two waits of Retry-After capped at 300 ms, took ${took} ms`);
    assert.ok(took < 1900, `gave up before the bucket refilled, took ${took} ms`);
  });

  it('waits Retry-After, not its backoff, and then passes', async () => {
    // One retry each: after the 250 ms backoff the bucket would still be empty.
    const c = new W.Client({ apiUrl: d.url, apiKey: key, maxRetries: 1, maxRetryDelayMs: 10_000 });
    await spend();
    let t0 = Date.now();
    const sb = await W.Sandbox.create({ client: c, metadata: { retried: '429' } });
    assert.ok(Date.now() - t0 >= 1900, `create waited Retry-After (2 s), took ${Date.now() - t0} ms`);
    assert.equal(sb.info.state, 'running');
    t0 = Date.now();
    const ids = [];
    for await (const i of W.Sandbox.list({ client: c })) ids.push(i.id);
    assert.ok(Date.now() - t0 >= 1900, `list waited Retry-After (2 s), took ${Date.now() - t0} ms`);
    assert.deepEqual(ids, [sb.id], 'the retried create (same Idempotency-Key) made one sandbox');
    assert.equal(await sb.kill(), true);
  });
});
