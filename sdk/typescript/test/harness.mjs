// SPDX-License-Identifier: Apache-2.0
// A real warrend for the SDK's tests, as tests/compat/harness.mjs makes one: a temporary state
// directory with the test templates (base; code-interpreter-v1 and desktop when they were built),
// a loopback port, a unix socket, and a run directory, cgroup parent, uid pool, address pool and
// nftables table of its own, chosen apart from tests/compat's (uids 0x50000000+, 10.192+) and
// conftest's (uids 0x60000000+, 10.128-191), so the suites can run side by side. Internet is
// off (--net-default off) and DNS goes to loopback's discard port: nothing leaves the machine.
// stop() deletes every sandbox and reports what was left behind.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const BUILD = process.env.WARREN_BUILD || path.join(here, '../../../build');
const TEMPLATES = process.env.WARREN_TEST_TEMPLATES || '/var/cache/warren/test-templates';
const BASE = process.env.WARREN_BASE_TEMPLATE || path.join(TEMPLATES, 'base');
const UID_SLOTS = 64;
let seq = 0;

function templateOk(dir) {
  return fs.existsSync(path.join(dir, 'rootfs/bin/sh')) && fs.existsSync(path.join(dir, 'config.json'));
}

/** Why the suite cannot run here, or undefined. */
export function unavailable() {
  if (process.getuid?.() !== 0) return 'needs root (warrend makes namespaces and cgroups)';
  if (!fs.existsSync(path.join(BUILD, 'warrend'))) return `no warrend in ${BUILD} (make TESTING=1)`;
  if (!templateOk(BASE)) return `no base template at ${BASE} (scripts/build-base.sh)`;
  return undefined;
}

/** Whether the test template `name` was built. */
export function hasTemplate(name) { return templateOk(path.join(TEMPLATES, name)); }

export class Daemon {
  constructor(tag, extra = []) {
    seq++;
    const id = `${process.pid}-${tag}`;
    this.extra = extra;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warren-tssdk-'));
    this.state = path.join(this.dir, 'state');
    this.sock = path.join(this.dir, 'warrend.sock');
    this.runDir = `/run/warren-tssdk-${id}`;
    this.cgroupParent = `warren-tssdk-${id}`;
    const k = (process.pid * 8 + seq) % 2048;
    this.uidBase = 0x70000000 + (k % 32) * UID_SLOTS * 65536;
    this.netPool = `10.${224 + (k >> 8)}.${k & 255}.0/24`;
    this.netTable = `wts${process.pid}_${tag.replace(/[^a-z0-9]/g, '')}`.slice(0, 32);
    this.domain = undefined;
    const link = (name, dir) => {
      const t = path.join(this.state, 'templates', name);
      fs.mkdirSync(t, { recursive: true });
      fs.symlinkSync(path.join(path.resolve(dir), 'rootfs'), path.join(t, 'rootfs'));
      fs.copyFileSync(path.join(dir, 'config.json'), path.join(t, 'config.json'));
    };
    link('base', BASE);
    for (const name of ['code-interpreter-v1', 'desktop'])
      if (hasTemplate(name)) link(name, path.join(TEMPLATES, name));
  }

  async start() {
    const log = fs.openSync(path.join(this.dir, 'warrend.log'), 'a');
    this.proc = spawn(path.join(BUILD, 'warrend'), [
      '--state-dir', this.state, '--socket', this.sock,
      '--listen', '127.0.0.1:0', '--run-dir', this.runDir, '--pool', '0', '--warm', '0',
      '--net-pool', this.netPool, '--net-table', this.netTable, '--net-ready', '1', '--net-default', 'off',
      '--dns-upstream', '127.0.0.1:9', ...this.extra,
    ], {
      stdio: ['ignore', 'pipe', log],
      env: {
        ...process.env,
        WARREN_RUN_DIR: this.runDir,
        WARREN_CGROUP_PARENT: this.cgroupParent,
        WARREN_UID_BASE: String(this.uidBase),
        WARREN_UID_SLOTS: String(UID_SLOTS),
      },
    });
    const rl = readline.createInterface({ input: this.proc.stdout });
    const line = await new Promise((resolve, reject) => {
      rl.once('line', resolve);
      this.proc.once('exit', (code) => reject(new Error(`warrend exited (${code}): ` +
        fs.readFileSync(path.join(this.dir, 'warrend.log'), 'utf8'))));
    });
    const m = /tcp=127\.0\.0\.1:(\d+)/.exec(line);
    if (!m) throw new Error(`warrend did not start: ${line}`);
    this.port = Number(m[1]);
    this.url = `http://127.0.0.1:${this.port}`;
    this.unixUrl = `unix://${this.sock}`;
    this.adminKey = fs.readFileSync(path.join(this.state, 'admin.key'), 'utf8').trim();
    return this;
  }

  /** A key of a team of its own. */
  async key(team) {
    const r = await fetch(`${this.url}/v1/keys`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${this.adminKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ team, name: 'tssdk' }),
    });
    if (r.status !== 201) throw new Error(`key: ${r.status} ${await r.text()}`);
    return (await r.json()).key;
  }

  async deleteAll() {
    const h = { Authorization: `Bearer ${this.adminKey}` };
    const r = await fetch(`${this.url}/v1/sandboxes?all=1&limit=1000&state=creating,running,paused,stopped,error`, { headers: h });
    const j = await r.json();
    for (const sb of j.sandboxes || [])
      await fetch(`${this.url}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: h });
  }

  log() { try { return fs.readFileSync(path.join(this.dir, 'warrend.log'), 'utf8'); } catch { return ''; } }

  async stop() {
    try { await this.deleteAll(); } catch { /* the daemon may be gone already */ }
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      this.proc.kill('SIGTERM');
      await exited;
    }
    const log = this.log();
    const leaksOnly = /ERROR: LeakSanitizer/.test(log) && !/ERROR: AddressSanitizer|runtime error:/.test(log);
    if (this.proc && this.proc.exitCode !== 0 && !leaksOnly)
      this.failure = `warrend exited with ${this.proc.exitCode} (${this.proc.signalCode}): ${log.slice(-4000)}`;
    const left = await waitClean(this);
    const slots = path.join(this.runDir, 'net', this.netTable);
    for (const e of safeList(slots)) spawnSync('umount', ['-l', path.join(slots, e)]);
    spawnSync('nft', ['delete', 'table', 'inet', this.netTable]);
    for (const hier of safeList('/sys/fs/cgroup')) {
      try { fs.rmdirSync(path.join('/sys/fs/cgroup', hier, this.cgroupParent)); } catch { /* none */ }
    }
    fs.rmSync(this.runDir, { recursive: true, force: true });
    fs.rmSync(this.dir, { recursive: true, force: true });
    return left;
  }
}

function safeList(d) { try { return fs.readdirSync(d); } catch { return []; } }

function leftovers(d) {
  const lo = d.uidBase, hi = d.uidBase + UID_SLOTS * 65536;
  const pids = [];
  for (const p of safeList('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const st = fs.readFileSync(`/proc/${p}/status`, 'utf8');
      const uids = /^Uid:\s+(.*)$/m.exec(st)[1].split(/\s+/).map(Number);
      if (uids.some((u) => u >= lo && u < hi)) pids.push(Number(p));
    } catch { /* gone */ }
  }
  const cgroups = [];
  for (const hier of safeList('/sys/fs/cgroup')) {
    const p = path.join('/sys/fs/cgroup', hier, d.cgroupParent);
    for (const c of safeList(p))
      if (fs.statSync(path.join(p, c), { throwIfNoEntry: false })?.isDirectory()) cgroups.push(path.join(p, c));
  }
  const runDir = safeList(path.join(d.runDir, 'sandboxes'));
  const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .filter((l) => l.includes(d.runDir) && !l.includes(path.join(d.runDir, 'net') + '/'));
  return { pids, cgroups, runDir, mounts };
}

async function waitClean(d, timeoutMs = 5000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const left = leftovers(d);
    if (!Object.values(left).some((v) => v.length) || Date.now() > end) return left;
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function isClean(left) { return !Object.values(left).some((v) => v.length); }

/** Start a daemon before the suite, stop it after, asserting a clean stop. */
export function withDaemon(t, tag, extra = []) {
  const holder = {};
  t.before(async () => { holder.d = await new Daemon(tag, extra).start(); });
  t.after(async () => {
    if (!holder.d) return;
    const left = await holder.d.stop();
    if (holder.d.failure) throw new Error(holder.d.failure);
    if (!isClean(left)) throw new Error(`left behind: ${JSON.stringify(left)}`);
  });
  return holder;
}
