// SPDX-License-Identifier: Apache-2.0
// @e2b/desktop 2.4.0, unchanged, against a real warrend and the `desktop` template
// (scripts/templates/desktop.sh): everything the SDK does is envd commands and files (Xvfb,
// startxfce4, scrot, xdotool, xrandr, x11vnc, novnc_proxy), routed by E2B_SANDBOX_URL as in the
// other compat tests. The VNC stream is reached through the daemon's port proxy
// (/v1/sandboxes/{id}/ports/6080/...), since the SDK's https://6080-<id>.<domain> URL needs DNS
// and TLS in front of warrend.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { Sandbox } from '@e2b/desktop';

import { Daemon, isClean, templateAvailable } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// Width and height from a PNG's IHDR.
function pngSize(buf) {
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(buf.subarray(12, 16).toString('latin1'), 'IHDR');
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

// A WebSocket handshake through the daemon; resolves with the first binary message's payload.
function wsFirstMessage(port, path, key) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, path,
      headers: {
        Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
        'Sec-WebSocket-Protocol': 'binary', Authorization: `Bearer ${key}`,
      },
    });
    req.on('upgrade', (res, sock, head) => {
      let buf = head;
      const onData = (d) => {
        buf = Buffer.concat([buf, d]);
        if (buf.length < 2) return;
        let n = buf[1] & 0x7f, off = 2;
        if (n === 126) { if (buf.length < 4) return; n = buf.readUInt16BE(2); off = 4; }
        if (buf.length < off + n) return;
        sock.destroy();
        resolve(buf.subarray(off, off + n));
      };
      sock.on('data', onData);
      onData(Buffer.alloc(0));
    });
    req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
    req.on('error', reject);
    req.end();
  });
}

const skip = templateAvailable('desktop') ? false
  : 'no desktop template (test.sh builds it: scripts/templates/desktop.sh)';
if (skip && process.env.CI === 'true') throw new Error(skip);

describe('@e2b/desktop 2.4.0', { skip, concurrency: false }, () => {
  let d, key, sbx;

  before(async () => {
    d = await new Daemon('desktop').start();
    key = await d.key('desktop');
    process.env.E2B_API_URL = d.url;
    process.env.E2B_SANDBOX_URL = d.url;
    process.env.E2B_API_KEY = key;
    process.env.E2B_DOMAIN = 'warren.test';
  });

  after(async () => {
    if (!d) return;
    const left = await d.stop();
    assert.ok(isClean(left), `left behind: ${JSON.stringify(left)}`);
    assert.equal(d.failure, undefined);
  });

  test('Sandbox.create() starts Xvfb and XFCE in template desktop', async () => {
    const t0 = Date.now();
    // No internet: nothing in the desktop needs it (and Chromium must not phone home).
    sbx = await Sandbox.create({ apiKey: key, timeoutMs: 300_000, allowInternetAccess: false });
    console.log(`# Sandbox.create (desktop, Xvfb + XFCE ready): ${Date.now() - t0} ms`);
    const info = await sbx.getInfo();
    assert.equal(info.templateId, 'desktop');
    assert.equal(info.allowInternetAccess, false);
    const r = await sbx.commands.run('pgrep -x xfce4-session && pgrep -x xfwm4 && pgrep -x xfdesktop && echo $DISPLAY');
    assert.match(r.stdout, /:0\n$/);
  });

  test('getScreenSize and a screenshot of that size', async () => {
    assert.deepEqual(await sbx.getScreenSize(), { width: 1024, height: 768 });
    const png = Buffer.from(await sbx.screenshot());
    assert.deepEqual(pngSize(png), { width: 1024, height: 768 });
    // The SDK's temporary file is gone again.
    await until(async () => !(await sbx.commands.run('ls /tmp')).stdout.includes('screenshot-'),
      'the screenshot file to be removed', 5000);
  });

  test('moveMouse then getCursorPosition; clicks and scroll', async () => {
    await sbx.moveMouse(100, 200);
    assert.deepEqual(await sbx.getCursorPosition(), { x: 100, y: 200 });
    await sbx.moveMouse(517, 333);
    assert.deepEqual(await sbx.getCursorPosition(), { x: 517, y: 333 });
    await sbx.leftClick(600, 400);
    assert.deepEqual(await sbx.getCursorPosition(), { x: 600, y: 400 });
    await sbx.rightClick();
    await sbx.press('escape');
    await sbx.scroll('down', 2);
    await sbx.drag([50, 50], [80, 90]);
    assert.deepEqual(await sbx.getCursorPosition(), { x: 80, y: 90 });
  });

  test('write() and press() arrive in a terminal window', async () => {
    await sbx.files.write('/tmp/typed.sh', 'cat > /tmp/typed\n');
    await (await sbx.commands.run('xfce4-terminal --disable-server --title=typing-here -x sh /tmp/typed.sh',
      { background: true })).disconnect();
    const wins = await until(async () => {
      try {
        const ids = await sbx.getApplicationWindows('xfce4-terminal');
        return ids.filter((x) => x).length ? ids : null;
      } catch { return null; }
    }, 'the terminal window');
    const titles = await Promise.all(wins.map((w) => sbx.getWindowTitle(w)));
    assert.ok(titles.includes('typing-here'), JSON.stringify(titles));
    // The terminal has the focus.
    const want = wins[titles.indexOf('typing-here')];
    await until(async () => {
      const f = await sbx.getCurrentWindowId();
      return f === want || (await sbx.getWindowTitle(f)) === 'typing-here';
    }, 'the focus on the terminal');
    await sbx.write("hello, it's $HOME & \"more\"");
    await sbx.press('enter');
    await sbx.write('hello');
    await sbx.press('enter');
    await sbx.press(['ctrl', 'd']);
    const got = await until(async () => {
      const r = await sbx.commands.run('cat /tmp/typed 2>/dev/null || true');
      return r.stdout === "hello, it's $HOME & \"more\"\nhello\n" ? r.stdout : null;
    }, 'the typed text in /tmp/typed');
    assert.equal(got, "hello, it's $HOME & \"more\"\nhello\n");
  });

  test('the VNC stream: x11vnc + noVNC, reached through the port proxy', async () => {
    await sbx.stream.start();
    const url = sbx.stream.getUrl();
    assert.match(url, new RegExp(`^https://6080-${sbx.sandboxId}\\.warren\\.test/vnc\\.html`));
    const r = await fetch(`${d.url}/v1/sandboxes/${sbx.sandboxId}/ports/6080/vnc.html`,
      { headers: { Authorization: `Bearer ${key}` } });
    assert.equal(r.status, 200);
    assert.match(await r.text(), /noVNC/);
    // websockify relays the VNC server: its first bytes are the RFB version.
    const first = await wsFirstMessage(d.port, `/v1/sandboxes/${sbx.sandboxId}/ports/6080/websockify`, key);
    assert.match(first.toString('latin1'), /^RFB 003\.00\d\n$/);
    await sbx.stream.stop();
  });

  test('screenshot round trip (benchmark)', async () => {
    const n = 10, times = [];
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      const png = Buffer.from(await sbx.screenshot());
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
      assert.equal(pngSize(png).width, 1024);
    }
    times.sort((a, b) => a - b);
    console.log(`# @e2b/desktop screenshot round trip: median ${times[n >> 1].toFixed(1)} ms, ` +
      `min ${times[0].toFixed(1)} ms, max ${times[n - 1].toFixed(1)} ms (n=${n})`);
  });

  test('kill', async () => {
    await sbx.kill();
    assert.equal(await sbx.isRunning(), false);
  });
});
