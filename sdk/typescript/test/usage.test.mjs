// SPDX-License-Identifier: Apache-2.0
// client.usage(), client.usageCsv() and client.teamLimits() against a real warrend whose usage
// intervals close every half second (--usage-interval-ms, a test build's option).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as W from '../dist/index.mjs';
import { Daemon, isClean, unavailable } from './harness.mjs';

const { Sandbox, Client } = W;

describe('usage', { skip: unavailable(), concurrency: false }, () => {
  let d, client, admin;
  before(async () => {
    d = await new Daemon('usage', ['--usage-interval-ms', '500']).start();
    client = new Client({ apiUrl: d.url, apiKey: await d.key('team-usage') });
    admin = new Client({ apiUrl: d.url, apiKey: d.adminKey });
  });
  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it("sums the ledger per sandbox, template and day, as JSON and CSV", async () => {
    const sb = await Sandbox.create({ client, timeout: 120 });
    const t0 = new Date(Date.now() - 60_000);
    let rows = [];
    for (let i = 0; i < 100 && !rows.some((r) => r.sandbox === sb.id && r.sandboxSeconds > 0); i++) {
      await new Promise((r) => setTimeout(r, 100));
      rows = (await client.usage({ from: t0 })).rows;
    }
    const mine = rows.find((r) => r.sandbox === sb.id);
    assert.ok(mine && mine.sandboxSeconds > 0 && mine.intervals >= 1, JSON.stringify(rows));
    assert.equal(mine.team, 'team-usage');
    assert.equal(mine.template, 'base');
    assert.ok(mine.vcpuSeconds > 0 && mine.from instanceof Date);
    const byTemplate = await client.usage({ groupBy: 'template', from: t0, to: new Date(Date.now() + 60_000) });
    assert.equal(byTemplate.groupBy, 'template');
    assert.ok(byTemplate.rows.some((r) => r.template === 'base' && r.sandboxSeconds > 0));
    assert.equal(byTemplate.billedSeconds, 'allocated');
    const byDay = await client.usage({ groupBy: 'day', from: Math.floor(t0.getTime() / 1000) });
    assert.match(byDay.rows[0].day, /^\d{4}-\d\d-\d\d$/);
    const csv = await client.usageCsv({ from: t0 });
    assert.match(csv.split('\n')[0], /sandbox_seconds/);
    assert.ok(csv.includes(sb.id));
    // An admin reads every team's; a team may not read another's.
    assert.ok((await admin.usage({ team: '', from: t0 })).rows.some((r) => r.sandbox === sb.id));
    await assert.rejects(client.usage({ team: 'someone-else' }), W.PermissionDeniedError);
    await assert.rejects(client.usage({ groupBy: 'week' }), W.InvalidArgumentError);
    await sb.kill();
  });

  it("says the team's limits", async () => {
    const l = await client.teamLimits('team-usage');
    assert.equal(l.team, 'team-usage');
    assert.equal(l.maxSandboxes, 100);
    assert.ok(l.requests.rate > 0 && l.requests.burst > 0);
    assert.deepEqual(l.overrides, {});
    await assert.rejects(client.teamLimits('someone-else'), W.PermissionDeniedError);
  });
});
