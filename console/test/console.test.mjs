// SPDX-License-Identifier: Apache-2.0
// The console end to end: Debian's headless Chromium (playwright-core, no browser of its own)
// against a real warrend serving the built console (build/console) with real sandboxes. A bad
// key is refused with the API's message; a good one signs in; a sandbox is made from the form;
// `echo hi` typed into its terminal comes back; one team's console never shows another's
// sandboxes. The run writes its screenshots into <build>/console-screenshots/, or, with
// WARREN_CONSOLE_SHOTS=docs, into docs/images/console/ (docs/console.md shows those): a test run
// does not change the tree unless asked to.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { Daemon, isClean, unavailable } from '../../sdk/typescript/test/harness.mjs';
import { BUILD } from '../../tests/compat/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const SHOTS =
  process.env.WARREN_CONSOLE_SHOTS === 'docs'
    ? path.join(here, '../../docs/images/console')
    : path.join(BUILD, 'console-screenshots');
const CONSOLE_DIR = path.join(BUILD, 'console');
const CHROMIUM = process.env.WARREN_CHROMIUM || ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));

function why() {
  const u = unavailable();
  if (u) return u;
  if (!CHROMIUM) return 'no chromium (scripts/deps.sh test installs Debian\'s)';
  if (!fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))) return `no console in ${CONSOLE_DIR} (make)`;
  return undefined;
}
const skip = why();
// CI must not pass by skipping (as conftest's MUST_WORK): there, a missing piece fails.
if (skip && process.env.CI) throw new Error(`the console's test cannot run: ${skip}`);

describe('console', { skip, concurrency: false }, () => {
  let d, browser, keyA, keyB;
  const problems = []; // CSP violations and page errors, from every page

  async function page(opts = {}) {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 }, ...opts });
    const p = await ctx.newPage();
    p.on('console', (m) => { if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text()); });
    p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    return p;
  }

  async function signIn(p, key) {
    await p.goto(`${d.url}/console/`);
    await p.getByLabel('API key').fill(key);
    await p.getByRole('button', { name: 'Sign in' }).click();
  }

  async function shot(p, name, fullPage = false) {
    fs.mkdirSync(SHOTS, { recursive: true });
    await p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage });
  }

  before(async () => {
    // Usage intervals close every second (a test build's option), so the ledger has the
    // sandbox's seconds while it runs.
    d = await new Daemon('console', ['--console-dir', CONSOLE_DIR, '--usage-interval-ms', '1000']).start();
    keyA = await d.key('team-a');
    keyB = await d.key('team-b');
    browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true,
      // As root, Chromium runs only without its sandbox; the page is our own console.
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });
  after(async () => {
    await browser?.close();
    if (!d) return;
    const left = await d.stop();
    assert.equal(d.failure, undefined);
    assert.ok(isClean(left), JSON.stringify(left));
  });

  it('refuses a bad key with the API\'s message', async () => {
    const p = await page();
    await signIn(p, 'wr_' + '0'.repeat(64));
    const alert = p.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /the API key is not valid/);
    assert.match(await alert.textContent(), /unauthorized/);
    assert.equal(await p.evaluate(() => sessionStorage.length), 0);
    await shot(p, 'sign-in-refused');
    await p.context().close();
  });

  let sandboxId;
  it('signs in, creates a sandbox, types echo hi into its terminal, and moves files', async () => {
    const p = await page();
    await signIn(p, keyA);
    await p.getByTestId('team').filter({ hasText: 'team-a' }).waitFor();
    // The key is in this tab's session storage only, and sent as a bearer token.
    assert.equal(await p.evaluate(() => Object.keys(sessionStorage).length), 1);
    assert.equal(await p.evaluate(() => localStorage.length + document.cookie.length), 0);
    await p.getByText('No sandboxes').waitFor();
    await p.getByLabel('Metadata', { exact: true }).fill('made-by=console-test');
    await p.getByRole('combobox', { name: /^Network/ }).selectOption('no-internet');
    await p.getByRole('button', { name: 'Create sandbox' }).click();
    // The form opens the new sandbox's page.
    await p.waitForURL(/\/console\/sandboxes\/[^/]+$/);
    sandboxId = decodeURIComponent(p.url().split('/').pop());
    await p.getByRole('heading', { name: sandboxId }).getByText('running').waitFor();
    await p.getByText('made-by=console-test').waitFor();
    await p.locator('figure.chart figcaption strong').first().filter({ hasText: '%' }).waitFor();
    await shot(p, 'sandbox');

    await p.getByRole('link', { name: 'Terminal' }).click();
    await p.getByTestId('terminal-status').filter({ hasText: 'Connected' }).waitFor();
    await p.getByTestId('terminal').click();
    await p.keyboard.type('echo hi\n');
    await p.waitForFunction(() => [...document.querySelectorAll('.xterm-rows > div')].some((r) => r.textContent.trim() === 'hi'), null, { timeout: 15_000 });
    await shot(p, 'terminal');

    // Files: upload one into /tmp, see it, download it, edit it.
    await p.getByRole('link', { name: 'Files' }).click();
    await p.getByLabel('Directory', { exact: true }).fill('/tmp');
    await p.getByRole('button', { name: 'Open', exact: true }).click();
    await p.getByLabel('Upload files').setInputFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the console\n') });
    const frow = p.locator('tr[data-file="hello.txt"]');
    await frow.waitFor();
    assert.match(await frow.locator('td[data-label="Size"]').textContent(), /23 B/);
    const [download] = await Promise.all([p.waitForEvent('download'), frow.getByRole('button', { name: 'Download' }).click()]);
    assert.equal(download.suggestedFilename(), 'hello.txt');
    assert.equal(fs.readFileSync(await download.path(), 'utf8'), 'hello from the console\n');
    await frow.getByRole('button', { name: 'Edit' }).click();
    const content = p.getByLabel('Content');
    await content.waitFor();
    assert.equal(await content.inputValue(), 'hello from the console\n');
    await content.fill('edited in the browser\n');
    await p.getByRole('button', { name: 'Save' }).click();
    await p.getByText(/Saved 22 B/).waitFor();
    await shot(p, 'files');
    const check = await fetch(`${d.url}/v1/sandboxes/${sandboxId}/files?path=/tmp/hello.txt`, { headers: { Authorization: `Bearer ${keyA}` } });
    assert.equal(await check.text(), 'edited in the browser\n');

    // Processes: one started through the API, listed, then killed from the page.
    const ex = await fetch(`${d.url}/v1/sandboxes/${sandboxId}/exec`, {
      method: 'POST', headers: { Authorization: `Bearer ${keyA}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ cmd: ['sleep', '300'], mode: 'background' }),
    });
    assert.equal(ex.status, 201);
    const { pid } = await ex.json();
    await p.getByRole('link', { name: 'Processes' }).click();
    const prow = p.locator(`tr[data-pid="${pid}"]`);
    await prow.getByText('sleep 300').waitFor();
    await prow.getByText('running').waitFor();
    await prow.getByRole('button', { name: 'Kill' }).click();
    await prow.getByRole('button', { name: 'Yes, kill' }).click();
    await prow.getByText(/killed by signal 9|ended/).waitFor();

    // Network: the policy, replaced from the page.
    await p.getByRole('link', { name: 'Network and ports' }).click();
    await p.getByLabel(/^Always allowed/).fill('example.com\n203.0.113.0/24');
    await p.getByRole('button', { name: 'Replace the policy' }).click();
    await p.getByText('The new policy is in force.').waitFor();
    const net = await (await fetch(`${d.url}/v1/sandboxes/${sandboxId}/network`, { headers: { Authorization: `Bearer ${keyA}` } })).json();
    assert.deepEqual([...net.allow_out].sort(), ['203.0.113.0/24', 'example.com']);
    await p.getByText('Nothing listens on a TCP port.').or(p.locator('table[aria-label="Ports"]')).waitFor();

    // The list shows it running, with its template, age, time left, CPU and memory.
    await p.getByRole('link', { name: 'Sandboxes' }).first().click();
    const row = p.locator(`tr[data-sandbox="${sandboxId}"]`);
    await row.getByText('running').waitFor();
    await row.locator('td[data-label="CPU"]').filter({ hasText: '%' }).waitFor();
    assert.match(await row.locator('td[data-label="Memory"]').textContent(), /iB \/ /);
    assert.match(await row.locator('td[data-label="Time left"]').textContent(), /min|s/);
    assert.equal(await row.locator('td[data-label="Template"]').textContent(), 'base');
    await shot(p, 'sandboxes');
    // Filtered by metadata and by state.
    await p.getByLabel('Filter by metadata').fill('made-by=nobody');
    await p.getByLabel('Filter by metadata').press('Enter');
    await p.getByText('No sandboxes').waitFor();
    await p.getByLabel('Filter by metadata').fill('made-by=console-test');
    await p.getByLabel('Filter by metadata').press('Enter');
    await row.waitFor();
    await p.getByLabel('State').selectOption('paused');
    await p.getByText('No sandboxes').waitFor();
    await p.getByLabel('State').selectOption('live');
    await row.waitFor();

    // On a narrow screen the table becomes cards.
    await p.setViewportSize({ width: 390, height: 844 });
    await row.getByText('running').waitFor();
    await shot(p, 'sandboxes-narrow');
    await p.context().close();
  });

  it("charts the team's usage with the sandbox's seconds, as CSV too, and its limits", async () => {
    const p = await page();
    await signIn(p, keyA);
    await p.getByRole('link', { name: 'Usage' }).click();
    const bar = p.locator('figure.bars g[data-bar="base"]');
    await bar.waitFor();
    assert.match(await bar.locator('title').textContent(), /^base: [\d.]+ s$/);
    const row = p.locator(`table[aria-label="Usage per sandbox"] tr[data-usage="${sandboxId}"]`);
    await row.waitFor();
    const running = await row.locator('td[data-label="Running"]').textContent();
    assert.ok(parseFloat(running) > 0, running);
    await p.getByText('Sandboxes now: 1 of 100').waitFor();
    await shot(p, 'usage');
    const [download] = await Promise.all([p.waitForEvent('download'), p.getByRole('button', { name: 'Download CSV (per sandbox)' }).click()]);
    const csv = fs.readFileSync(await download.path(), 'utf8');
    assert.match(csv.split('\n')[0], /sandbox_seconds/);
    assert.ok(csv.includes(sandboxId));
    await p.context().close();
  });

  it('shows the API\'s errors for actions it refuses, and resumes and deletes', async () => {
    const p = await page();
    await signIn(p, keyA);
    await p.goto(`${d.url}/console/sandboxes/${encodeURIComponent(sandboxId)}`);
    await p.getByRole('heading', { name: sandboxId }).getByText('running').waitFor();
    // Past the daemon's --max-timeout (a day): the API's own words.
    await p.getByLabel('Extend by (s)').fill('999999999');
    await p.getByRole('button', { name: 'Extend' }).click();
    const alert = p.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /The API said:/);
    assert.match(await alert.textContent(), /timeout/);
    await p.getByRole('button', { name: 'Dismiss' }).click();
    await p.getByRole('button', { name: 'Pause' }).click();
    await p.getByRole('heading', { name: sandboxId }).getByText('paused').waitFor();
    await p.getByRole('button', { name: 'Resume' }).click();
    await p.getByRole('heading', { name: sandboxId }).getByText('running').waitFor();
    await p.context().close();
  });

  it('builds a template from a pasted Dockerfile, its log streaming, and deletes it', async () => {
    const p = await page();
    await signIn(p, keyA);
    await p.getByRole('link', { name: 'Templates' }).click();
    await p.locator('tr[data-template="base"]').waitFor();
    await p.getByLabel('Name', { exact: true }).fill('console-built');
    await p.getByLabel(/^Dockerfile/).fill('FROM base\nUSER root\nRUN echo built-by-the-console; echo to-stderr >&2; touch /built\n');
    await p.getByRole('button', { name: 'Build', exact: true }).click();
    const log = p.getByTestId('build-log');
    await log.filter({ hasText: 'Step 3/3' }).waitFor({ timeout: 60_000 });
    await p.getByText('Built template console-built').waitFor({ timeout: 60_000 });
    const text = await log.textContent();
    assert.match(text, /Step 1\/3 \(line 1\): FROM base/);
    assert.match(text, /built-by-the-console/);
    assert.match(text, /to-stderr/);
    const row = p.locator('tr[data-template="console-built"]');
    await row.waitFor();
    await shot(p, 'templates', true);
    // A Dockerfile the daemon refuses: its words.
    await p.getByLabel('Name', { exact: true }).fill('console-bad');
    await p.getByLabel(/^Dockerfile/).fill('FROM no-such-template\n');
    await p.getByRole('button', { name: 'Build', exact: true }).click();
    const alert = p.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /no-such-template/);
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await row.waitFor({ state: 'detached' });
    await p.context().close();
  });

  it('makes a key (shown once) as an admin, revokes it, and a team key may not make one', async () => {
    const p = await page();
    await signIn(p, d.adminKey);
    await p.getByRole('link', { name: 'Keys and volumes' }).click();
    await p.getByLabel('Team', { exact: true }).fill('team-c');
    await p.getByLabel('Name', { exact: true }).fill('from-console');
    await p.getByRole('button', { name: 'Make the key' }).click();
    const secret = await p.getByTestId('new-key').textContent();
    assert.match(secret, /^wr_[0-9a-f]{64}$/);
    const who = async () => (await fetch(`${d.url}/v1/version`, { headers: { Authorization: `Bearer ${secret}` } }));
    assert.equal((await (await who()).json()).team, 'team-c');
    const row = p.locator('tr', { hasText: 'from-console' });
    await row.waitFor();
    await shot(p, 'keys');
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByRole('button', { name: 'Yes, revoke' }).click();
    await row.waitFor({ state: 'detached' });
    assert.equal((await who()).status, 401);
    await p.context().close();

    const q = await page();
    await signIn(q, keyA);
    await q.getByRole('link', { name: 'Keys and volumes' }).click();
    await q.getByRole('button', { name: 'Make the key' }).click();
    const alert = q.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /only an admin key can make keys/);
    await q.context().close();
  });

  it("never shows one team's sandboxes to another", async () => {
    const p = await page();
    await signIn(p, keyB);
    await p.getByTestId('team').filter({ hasText: 'team-b' }).waitFor();
    await p.getByText('No sandboxes').waitFor();
    await p.getByLabel('State').selectOption('all');
    await p.getByText('No sandboxes').waitFor();
    assert.equal(await p.locator(`tr[data-sandbox="${sandboxId}"]`).count(), 0);
    // Its page, reached by its id, says what the API says: not found.
    await p.goto(`${d.url}/console/sandboxes/${encodeURIComponent(sandboxId)}`);
    const alert = p.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /not_found/);
    await p.goto(`${d.url}/console/sandboxes/${encodeURIComponent(sandboxId)}/terminal`);
    await p.getByRole('alert').waitFor();
    assert.equal(await p.getByTestId('terminal').count(), 0);
    await p.context().close();
  });

  it('deletes a sandbox from the list, and signs out', async () => {
    const p = await page();
    await signIn(p, keyA);
    const row = p.locator(`tr[data-sandbox="${sandboxId}"]`);
    await row.waitFor();
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await p.getByText('No sandboxes').waitFor();
    await p.getByRole('button', { name: 'Sign out' }).click();
    await p.getByLabel('API key').waitFor();
    assert.equal(await p.evaluate(() => sessionStorage.length), 0);
    await p.context().close();
  });

  it('broke no content security policy and threw no error', () => {
    assert.deepEqual(problems, []);
  });
});
