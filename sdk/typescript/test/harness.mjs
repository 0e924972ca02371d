// SPDX-License-Identifier: Apache-2.0
// A real warrend for the SDK's tests: tests/compat/harness.mjs's daemon (a temporary state
// directory with the test templates, a loopback port, a unix socket, and a run directory, cgroup
// parent, uid pool, address pool and nftables table of its own), with names and ranges apart from
// tests/compat's (uids 0x50000000+, 10.192+) and conftest's (uids 0x60000000+, 10.128-191), so
// the suites can run side by side. Internet is off (--net-default off), no sandboxes are kept
// warm, and DNS goes to loopback's discard port: nothing leaves the machine. stop() deletes every
// sandbox and reports what was left behind.
import fs from 'node:fs';
import path from 'node:path';

import { BASE, BUILD, Daemon as CompatDaemon, baseAvailable, isClean, templateAvailable }
  from '../../../tests/compat/harness.mjs';

export { isClean };

/** Why the suite cannot run here, or undefined. */
export function unavailable() {
  if (process.getuid?.() !== 0) return 'needs root (warrend makes namespaces and cgroups)';
  if (!fs.existsSync(path.join(BUILD, 'warrend'))) return `no warrend in ${BUILD} (make TESTING=1)`;
  if (!baseAvailable()) return `no base template at ${BASE} (scripts/build-base.sh)`;
  return undefined;
}

/** Whether the test template `name` was built. */
export const hasTemplate = templateAvailable;

export class Daemon extends CompatDaemon {
  /** extra: more warrend flags. */
  constructor(tag, extra = []) {
    super(tag, {
      name: 'tssdk', uidBase: 0x70000000, uidSpread: 32, netBase: 224, netSpread: 2048,
      tablePrefix: 'wts', netReady: 1, domain: undefined,
      args: ['--warm', '0', '--net-default', 'off', ...extra],
    });
  }
}

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
