// SPDX-License-Identifier: Apache-2.0
// A sandbox's processes (those started through the API: execs, terminals), its exposed ports
// with their URLs, its network policy (shown and replaced) and its egress log.
import { useState } from 'preact/hooks';
import type { NetworkLogEntry, NetworkPolicy, PortInfo, ProcessInfo, Sandbox } from '@warren/sdk';
import { bytes, time } from '../format';
import { ConfirmButton, ErrorNote, usePoll } from '../ui';

const LOG_SHOWN = 200;

export function ProcessesView({ sb }: { sb: Sandbox }) {
  const [procs, setProcs] = useState<ProcessInfo[] | undefined>();
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);
  usePoll(async (signal) => {
    try { setProcs(await sb.commands.list({ signal })); setError(undefined); } catch (e) { if (!signal.aborted) setError(e); }
  }, 3000, [sb.id, tick]);
  return (
    <section aria-labelledby="procs-title">
      <h2 id="procs-title">Processes started through the API</h2>
      <ErrorNote error={error} onDismiss={() => setError(undefined)} />
      {procs === undefined ? <p aria-live="polite">Loading…</p> : procs.length === 0 ? <p class="empty">None: commands and terminals started through the API show here.</p> : (
        <table class="list" aria-label="Processes">
          <thead><tr><th scope="col">API pid</th><th scope="col">Command</th><th scope="col">State</th><th scope="col">Pid inside</th><th scope="col">Terminal</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {procs.map((p) => (
              <tr key={p.pid} data-pid={p.pid}>
                <th scope="row" data-label="API pid">{p.pid}</th>
                <td data-label="Command"><code>{p.cmd.join(' ')}</code></td>
                <td data-label="State">{p.running ? 'running' : p.exitCode !== undefined ? `exited ${p.exitCode}` : p.signal !== undefined ? `killed by signal ${p.signal}` : 'ended'}</td>
                <td data-label="Pid inside">{p.osPid ?? '—'}</td>
                <td data-label="Terminal">{p.pty ? 'yes' : 'no'}</td>
                <td data-label="Actions">{p.running && <ConfirmButton label="Kill" question={`Kill ${p.pid}?`} onConfirm={async () => {
                  try { await sb.commands.kill(p.pid); setTick((t) => t + 1); } catch (e) { setError(e); }
                }} />}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function list(text: string): string[] {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}

function Policy({ sb, policy, onChanged }: { sb: Sandbox; policy: NetworkPolicy; onChanged: () => void }) {
  const [internet, setInternet] = useState(policy.internet);
  const [allow, setAllow] = useState(policy.allowOut.join('\n'));
  const [deny, setDeny] = useState(policy.denyOut.join('\n'));
  const [error, setError] = useState<unknown>();
  const [status, setStatus] = useState('');
  async function submit(e: Event) {
    e.preventDefault();
    setError(undefined);
    setStatus('');
    try {
      await sb.updateNetwork({ internet, allowOut: list(allow), denyOut: list(deny), ...(policy.maxConnections !== undefined ? { maxConnections: policy.maxConnections } : {}) });
      setStatus('The new policy is in force.');
      onChanged();
    } catch (err) { setError(err); }
  }
  if (!policy.enabled) return <p>This sandbox has loopback only: no network of its own, no policy.</p>;
  return (
    <form class="card" onSubmit={submit} aria-labelledby="policy-title">
      <h3 id="policy-title">Egress policy</h3>
      <p>Address <code>{policy.address ?? '—'}</code>; ports {policy.portsPublic ? 'public' : 'private (need its traffic token)'}{policy.maxConnections !== undefined ? `; at most ${policy.maxConnections} connections out` : ''}.</p>
      <label class="check"><input type="checkbox" name="internet" checked={internet} onChange={(e) => setInternet((e.target as HTMLInputElement).checked)} /> Internet (beyond the allowed list)</label>
      <div class="grid2">
        <label>Always allowed: addresses, CIDR blocks, names, *.names (one a line)
          <textarea name="allow-out" rows={4} value={allow} onInput={(e) => setAllow((e.target as HTMLTextAreaElement).value)} />
        </label>
        <label>Never reachable: addresses, CIDR blocks (one a line)
          <textarea name="deny-out" rows={4} value={deny} onInput={(e) => setDeny((e.target as HTMLTextAreaElement).value)} />
        </label>
      </div>
      <button type="submit" class="primary">Replace the policy</button>
      <span aria-live="polite" class="status"> {status}</span>
      <ErrorNote error={error} />
    </form>
  );
}

export function NetworkView({ sb }: { sb: Sandbox }) {
  const [policy, setPolicy] = useState<NetworkPolicy | undefined>();
  const [ports, setPorts] = useState<(PortInfo & { url: string })[] | undefined>();
  const [log, setLog] = useState<NetworkLogEntry[] | undefined>();
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);

  usePoll(async (signal) => {
    try {
      const [p, ps] = await Promise.all([sb.network({ signal }), sb.ports({ signal })]);
      const withUrls = await Promise.all(ps.map(async (x) => ({ ...x, url: await sb.getHost(x.port, { signal }) })));
      const entries: NetworkLogEntry[] = [];
      for await (const e of sb.networkLog({ signal, pageSize: 1000 })) {
        entries.push(e);
        if (entries.length > 5 * LOG_SHOWN) entries.splice(0, entries.length - LOG_SHOWN);
      }
      setPolicy((old) => (old && JSON.stringify(old.raw) === JSON.stringify(p.raw) ? old : p));
      setPorts(withUrls);
      setLog(entries.slice(-LOG_SHOWN).reverse());
      setError(undefined);
    } catch (e) { if (!signal.aborted) setError(e); }
  }, 5000, [sb.id, tick]);

  return (
    <section aria-labelledby="net-title">
      <h2 id="net-title" class="sr-only">Network</h2>
      <ErrorNote error={error} />
      {policy && <Policy key={JSON.stringify(policy.raw)} sb={sb} policy={policy} onChanged={() => setTick((t) => t + 1)} />}
      <h3>Ports listening inside</h3>
      {ports === undefined ? <p aria-live="polite">Loading…</p> : ports.length === 0 ? <p class="empty">Nothing listens on a TCP port.</p> : (
        <table class="list" aria-label="Ports">
          <thead><tr><th scope="col">Port</th><th scope="col">Address</th><th scope="col">Reached at</th></tr></thead>
          <tbody>
            {ports.map((p) => (
              <tr key={`${p.address}:${p.port}`} data-port={p.port}>
                <th scope="row" data-label="Port">{p.port}</th>
                <td data-label="Address"><code>{p.address}</code></td>
                <td data-label="Reached at"><code>{p.url}</code>{p.url.startsWith('http') && <span class="muted small"> (with the API key)</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3 class="spaced">Egress log (newest first, the last {LOG_SHOWN})</h3>
      {log === undefined ? <p aria-live="polite">Loading…</p> : log.length === 0 ? <p class="empty">No connection out yet.</p> : (
        <table class="list" aria-label="Egress log">
          <thead><tr><th scope="col">Time</th><th scope="col">To</th><th scope="col">Verdict</th><th scope="col">Rule</th><th scope="col">Out / in</th></tr></thead>
          <tbody>
            {log.map((e) => (
              <tr key={e.id}>
                <th scope="row" data-label="Time">{time(e.time)}</th>
                <td data-label="To"><code>{e.name ? `${e.name} (${e.address})` : e.address}:{e.port}</code> {e.proto}</td>
                <td data-label="Verdict"><span class={`badge ${e.allowed ? 'state-running' : 'state-error'}`}>{e.allowed ? 'allowed' : 'denied'}</span></td>
                <td data-label="Rule">{e.rule}</td>
                <td data-label="Out / in">{bytes(e.bytesOut)} / {bytes(e.bytesIn)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
