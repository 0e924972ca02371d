// SPDX-License-Identifier: Apache-2.0
// A real warrend for the compat tests: a temporary state directory with the Debian `base`
// template (WARREN_BASE_TEMPLATE), a loopback port, and a run directory, cgroup parent and uid
// pool of its own (as tests/integration/conftest.py), so it cannot collide with another test
// session. stop() deletes every sandbox and checks that nothing is left behind.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const BUILD = process.env.WARREN_BUILD || path.join(here, '../../build');
export const BASE = process.env.WARREN_BASE_TEMPLATE || '/var/cache/warren/test-templates/base';
const UID_SLOTS = 64;
// The templates built on the base (scripts/templates/, built by test.sh): linked into every
// daemon that finds them, so the unchanged SDKs' default names (code-interpreter-v1, desktop)
// resolve.
const TEST_TEMPLATES = process.env.WARREN_TEST_TEMPLATES || '/var/cache/warren/test-templates';

export function templateAvailable(name) {
  const d = path.join(TEST_TEMPLATES, name);
  return fs.existsSync(path.join(d, 'rootfs/bin/bash')) && fs.existsSync(path.join(d, 'config.json'));
}

export function baseAvailable() {
  return fs.existsSync(path.join(BASE, 'rootfs/bin/bash')) &&
         fs.existsSync(path.join(BASE, 'config.json'));
}

let seq = 0;

// The compat suites' daemons: uids from 0x50000000 (away from the default pool at 2^30 and the
// integration suite's 0x60000000), 64 ranges of UID_SLOTS; address pools 10.192-207.x.
const COMPAT = { name: 'compat', uidBase: 0x50000000, uidSpread: 64, netBase: 192, netSpread: 4096,
                 tablePrefix: 'wc', netReady: 2, domain: 'warren.test', args: [] };

export class Daemon {
  // tag names the daemon; opts (sdk/typescript/test/harness.mjs passes its own) pick the names,
  // the uid and address ranges, and more warrend flags (`args`).
  constructor(tag, opts = {}) {
    const o = { ...COMPAT, ...opts };
    const id = `${process.pid}-${tag}`;
    const k = process.pid * 8 + seq++;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `warren-${o.name}-`));
    this.state = path.join(this.dir, 'state');
    this.sock = path.join(this.dir, 'warrend.sock');
    this.runDir = `/run/warren-${o.name}-${id}`;
    this.cgroupParent = `warren-${o.name}-${id}`;
    this.uidBase = o.uidBase + (k % o.uidSpread) * UID_SLOTS * 65536;
    // Networking of its own (docs/networking.md), as conftest.py's daemons: a pool and nftables
    // table nobody else uses, and a DNS upstream that answers nothing and sends nothing off the
    // machine (loopback's discard port). The E2B SDKs ask for internet on every create.
    const n = k % o.netSpread;
    this.netPool = `10.${o.netBase + (n >> 8)}.${n & 255}.0/24`;
    this.netTable = `${o.tablePrefix}${process.pid}_${tag.replace(/[^a-z0-9]/g, '')}`.slice(0, 32);
    this.netReady = o.netReady;
    this.domain = o.domain;
    this.extraArgs = [...o.args]; // more warrend flags, may be added to before start()
    const tdir = path.join(this.state, 'templates', 'base');
    fs.mkdirSync(tdir, { recursive: true });
    fs.symlinkSync(path.join(path.resolve(BASE), 'rootfs'), path.join(tdir, 'rootfs'));
    fs.copyFileSync(path.join(BASE, 'config.json'), path.join(tdir, 'config.json'));
    const profiles = fs.existsSync(path.join(here, '../../scripts/templates'))
      ? fs.readdirSync(path.join(here, '../../scripts/templates')).filter((f) => f.endsWith('.sh'))
      : [];
    for (const name of profiles.map((f) => f.slice(0, -3)).filter(templateAvailable)) {
      const src = path.join(TEST_TEMPLATES, name);
      const dir = path.join(this.state, 'templates', name);
      fs.mkdirSync(dir, { recursive: true });
      fs.symlinkSync(path.join(src, 'rootfs'), path.join(dir, 'rootfs'));
      fs.copyFileSync(path.join(src, 'config.json'), path.join(dir, 'config.json'));
    }
  }

  async start() {
    const log = fs.openSync(path.join(this.dir, 'warrend.log'), 'a');
    this.proc = spawn(path.join(BUILD, 'warrend'), [
      '--state-dir', this.state, '--socket', this.sock,
      '--listen', '127.0.0.1:0', '--run-dir', this.runDir, '--pool', '0',
      '--net-pool', this.netPool, '--net-table', this.netTable, '--net-ready', String(this.netReady),
      '--dns-upstream', '127.0.0.1:9', ...(this.domain ? ['--domain', this.domain] : []),
      ...this.extraArgs,
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

  // A key of a team of its own (through the native API).
  async key(team) {
    const r = await fetch(`${this.url}/v1/keys`, {
      method: 'POST',
      headers: { 'Authorization': `Bearer ${this.adminKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ team, name: 'compat' }),
    });
    if (r.status !== 201) throw new Error(`key: ${r.status} ${await r.text()}`);
    const j = await r.json();
    return j.key || j.secret;
  }

  log() { try { return fs.readFileSync(path.join(this.dir, 'warrend.log'), 'utf8'); } catch { return ''; } }

  async deleteAll() {
    const h = { 'Authorization': `Bearer ${this.adminKey}` };
    const r = await fetch(`${this.url}/v1/sandboxes?all=1&limit=1000&state=creating,running,paused,stopped,error`, { headers: h });
    const j = await r.json();
    for (const sb of j.sandboxes || [])
      await fetch(`${this.url}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: h });
  }

  async stop() {
    try { await this.deleteAll(); } catch { /* the daemon may be gone already */ }
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      this.proc.kill('SIGTERM');
      await exited;
    }
    // A daemon that crashed, or hit an ASan or UBSan error, fails the suite. Leaks (LeakSanitizer,
    // at exit) are shown but do not fail it: the manager leaks a sandbox's record when it is
    // deleted before its agent is ready, which is not this suite's to fix.
    const log = this.log();
    const leaksOnly = /ERROR: LeakSanitizer/.test(log) && !/ERROR: AddressSanitizer|runtime error:/.test(log);
    if (this.proc && this.proc.exitCode !== 0 && !leaksOnly)
      this.failure = `warrend exited with ${this.proc.exitCode} (${this.proc.signalCode}): ${log.slice(-8000)}`;
    else if (leaksOnly)
      console.error(`warrend reported leaks at exit:\n${log.slice(log.indexOf('==')).slice(0, 4000)}`);
    const left = await waitClean(this);
    // The network slots outlive a daemon on purpose: the test removes them, and the table.
    const slots = path.join(this.runDir, 'net', this.netTable);
    for (const e of safeList(slots)) {
      spawnSync('umount', ['-l', path.join(slots, e)]);
    }
    spawnSync('nft', ['delete', 'table', 'inet', this.netTable]);
    for (const hier of safeList('/sys/fs/cgroup')) {
      try { fs.rmdirSync(path.join('/sys/fs/cgroup', hier, this.cgroupParent)); } catch { }
    }
    fs.rmSync(this.runDir, { recursive: true, force: true });
    fs.rmSync(this.dir, { recursive: true, force: true });
    return left;
  }
}

function safeList(d) {
  try { return fs.readdirSync(d); } catch { return []; }
}

// What conftest.py's `leftovers` checks: processes in the uid pool, cgroups, run directory
// entries, mounts.
function leftovers(d) {
  const lo = d.uidBase, hi = d.uidBase + UID_SLOTS * 65536;
  const pids = [];
  for (const p of safeList('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const st = fs.readFileSync(`/proc/${p}/status`, 'utf8');
      const uids = /^Uid:\s+(.*)$/m.exec(st)[1].split(/\s+/).map(Number);
      if (uids.some((u) => u >= lo && u < hi)) pids.push(Number(p));
    } catch { }
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

export function isClean(left) {
  return !Object.values(left).some((v) => v.length);
}

// A cluster for the compat tests (docs/deploy.md): PostgreSQL 15 (Debian's, run as the
// `postgres` user on a unix socket in a temporary directory), `nodes` node daemons (Daemon
// above, with --role node) and one gateway in front of them on loopback. It has what the suites
// use of a Daemon: url, port (the gateway's), key(team), stop().
export class Cluster {
  constructor(tag, nodes = 2) {
    this.tag = tag;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warren-cluster-'));
    this.token = path.join(this.dir, 'node-token');
    fs.writeFileSync(this.token, `tok_${process.pid}_${Date.now()}_compat\n`);
    this.pg = path.join(this.dir, 'pg');
    this.nodes = [];
    for (let i = 1; i <= nodes; i++)
      this.nodes.push(new Daemon(`${tag}-n${i}`, { args: ['--role', 'node', '--node-id', `n${i}`,
        '--node-token-file', this.token] }));
  }

  pgRun(...args) {
    const r = spawnSync('runuser', ['-u', 'postgres', '--', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${args[0]}: ${r.stderr}${r.stdout}`);
  }

  async start() {
    const bin = '/usr/lib/postgresql/15/bin';
    fs.mkdirSync(this.pg);
    spawnSync('chown', ['postgres', this.pg]);
    fs.chmodSync(this.dir, 0o755);
    this.pgRun(`${bin}/initdb`, '-D', `${this.pg}/data`, '-A', 'trust', '-U', 'postgres');
    this.pgRun(`${bin}/pg_ctl`, '-D', `${this.pg}/data`, '-w', '-l', `${this.pg}/log`, '-o',
      `-c listen_addresses='' -c unix_socket_directories=${this.pg} -c fsync=off`, 'start');
    this.pgUp = true;
    for (const n of this.nodes) await n.start();
    const peers = this.nodes.map((n, i) => `n${i + 1}@127.0.0.1:${n.port}`).join(',');
    const log = fs.openSync(path.join(this.dir, 'gateway.log'), 'a');
    this.adminKeyFile = path.join(this.dir, 'admin.key');
    this.proc = spawn(path.join(BUILD, 'warrend'), [
      '--role', 'gateway', '--database', `host=${this.pg} dbname=postgres user=postgres`,
      '--discovery', `static:${peers}`, '--node-token-file', this.token,
      '--admin-key-file', this.adminKeyFile, '--listen', '127.0.0.1:0', '--domain', 'warren.test',
      '--health-interval-ms', '300',
    ], { stdio: ['ignore', 'pipe', log] });
    const rl = readline.createInterface({ input: this.proc.stdout });
    const line = await new Promise((resolve, reject) => {
      rl.once('line', resolve);
      this.proc.once('exit', (code) => reject(new Error(`gateway exited (${code}): ${this.log()}`)));
    });
    const m = /tcp=127\.0\.0\.1:(\d+)/.exec(line);
    if (!m) throw new Error(`the gateway did not start: ${line}`);
    this.port = Number(m[1]);
    this.url = `http://127.0.0.1:${this.port}`;
    this.adminKey = fs.readFileSync(this.adminKeyFile, 'utf8').trim();
    return this;
  }

  log() { try { return fs.readFileSync(path.join(this.dir, 'gateway.log'), 'utf8'); } catch { return ''; } }

  async key(team) {
    return Daemon.prototype.key.call(this, team);
  }

  async stop() {
    const left = { pids: [], cgroups: [], runDir: [], mounts: [] };
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      this.proc.kill('SIGTERM');
      await exited;
      if (this.proc.exitCode !== 0)
        this.failure = `the gateway exited with ${this.proc.exitCode}: ${this.log().slice(-4000)}`;
    }
    for (const n of this.nodes) {
      const l = await n.stop();
      for (const k of Object.keys(left)) left[k].push(...(l[k] || []));
      if (n.failure) this.failure = n.failure;
    }
    if (this.pgUp)
      spawnSync('runuser', ['-u', 'postgres', '--', '/usr/lib/postgresql/15/bin/pg_ctl', '-D',
        `${this.pg}/data`, '-m', 'immediate', 'stop']);
    fs.rmSync(this.dir, { recursive: true, force: true });
    return left;
  }
}
