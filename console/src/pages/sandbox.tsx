// SPDX-License-Identifier: Apache-2.0
// One sandbox: its details, its CPU and memory as charts, its actions (extend, pause, resume,
// snapshot, fork, delete) with the API's errors as it says them, and a terminal.
import { useEffect, useState } from 'preact/hooks';
import { type MetricSample, NotFoundError, Sandbox, type SandboxInfo } from '@warren/sdk';
import { bytes, duration, percent, time } from '../format';
import { navigate } from '../router';
import type { Session } from '../session';
import { Link } from '../shell';
import { Chart, ConfirmButton, ErrorNote, Field, StateBadge, usePoll } from '../ui';
import { FilesView } from './files';
import { NetworkView, ProcessesView } from './inspect';
import type { TerminalView as TerminalViewType } from './terminal';

const POLL_MS = 3000;

const TABS: { id: string; label: string; live?: boolean }[] = [
  { id: 'overview', label: 'Overview' },
  { id: 'terminal', label: 'Terminal', live: true },
  { id: 'files', label: 'Files', live: true },
  { id: 'processes', label: 'Processes', live: true },
  { id: 'network', label: 'Network and ports', live: true },
];

/** xterm.js is most of the console's weight: it is loaded with the first terminal. */
function LazyTerminal({ sb }: { sb: Sandbox }) {
  const [View, setView] = useState<typeof TerminalViewType | undefined>();
  const [error, setError] = useState<unknown>();
  useEffect(() => { import('./terminal').then((m) => setView(() => m.TerminalView), setError); }, []);
  if (error) return <ErrorNote error={error} />;
  return View ? <View sb={sb} /> : <p aria-live="polite">Loading the terminal…</p>;
}

function Details({ info }: { info: SandboxInfo }) {
  const n = info.network;
  return (
    <dl class="details">
      <Field name="Template">{info.template}</Field>
      <Field name="State"><StateBadge state={info.state} />{info.reason && <span class="muted"> {info.reason}</span>}</Field>
      <Field name="Runtime">{info.runtime}</Field>
      <Field name="vCPUs">{info.cpus}</Field>
      <Field name="Memory">{bytes(info.memoryMb * 1048576)}</Field>
      <Field name="Disk">{info.diskMb !== undefined ? bytes(info.diskMb * 1048576) : 'no limit'}</Field>
      <Field name="Created">{time(info.createdAt)}</Field>
      <Field name="Expires">{info.state === 'paused' ? `paused (${info.pausedMode ?? 'memory'}), ${duration(info.remainingMs)} left` : time(info.expiresAt)}</Field>
      <Field name="On timeout">{info.onTimeout}</Field>
      <Field name="Network">{n ? (n.enabled ? `${n.address ?? 'no address'}, internet ${n.internet ? 'on' : 'off'}` : 'loopback only') : '—'}</Field>
      <Field name="Metadata">{Object.keys(info.metadata).length ? Object.entries(info.metadata).map(([k, v]) => <code key={k} class="tag">{k}={v}</code>) : '—'}</Field>
      <Field name="Volumes">{info.volumes.length ? info.volumes.map((v) => <code key={v.name} class="tag">{v.name}:{v.path}{v.readonly ? ':ro' : ''}</code>) : '—'}</Field>
    </dl>
  );
}

function Metrics({ samples }: { samples: MetricSample[] }) {
  const pts = (f: (s: MetricSample) => number) => samples.filter((s) => s.timestamp).map((s) => ({ t: s.timestamp!.getTime(), v: f(s) }));
  const limit = samples.length ? samples[samples.length - 1]!.memoryLimitBytes : undefined;
  const cpus = samples.length ? samples[samples.length - 1]!.cpuCount : 1;
  return (
    <div class="charts">
      <Chart label="CPU" points={pts((s) => s.cpuPct)} max={100 * Math.max(cpus, 1)} format={percent} />
      <Chart label="Memory" points={pts((s) => s.memoryBytes)} max={limit} format={bytes} />
    </div>
  );
}

function Actions({ sb, info, onChanged }: { sb: Sandbox; info: SandboxInfo; onChanged: () => void }) {
  const [extendBy, setExtendBy] = useState('300');
  const [snapName, setSnapName] = useState('');
  const [busy, setBusy] = useState<string | undefined>();
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<preact.ComponentChildren>();

  async function act(name: string, fn: () => Promise<preact.ComponentChildren | void>) {
    setBusy(name);
    setError(undefined);
    setDone(undefined);
    try {
      const r = await fn();
      setDone(r ?? `${name}: done.`);
      onChanged();
    } catch (e) { setError(e); } finally { setBusy(undefined); }
  }

  const running = info.state === 'running';
  const paused = info.state === 'paused';
  return (
    <section class="card actions" aria-labelledby="actions-title">
      <h2 id="actions-title">Actions</h2>
      <div class="action-row">
        <form class="inline" onSubmit={(e) => {
          e.preventDefault();
          void act('Extend', async () => {
            const left = info.expiresAt ? Math.max(0, (info.expiresAt.getTime() - Date.now()) / 1000) : 0;
            const i = await sb.setTimeout(left + Number(extendBy));
            return `Extended: it now ends at ${time(i.expiresAt)}.`;
          });
        }}>
          <label>Extend by (s) <input name="extend" type="number" min={1} value={extendBy} onInput={(e) => setExtendBy((e.target as HTMLInputElement).value)} /></label>
          <button type="submit" disabled={!!busy || !running}>Extend</button>
        </form>
        <button type="button" disabled={!!busy || !running} onClick={() => act('Pause', async () => { await sb.pause(); return 'Paused: its processes are frozen and its clock stopped.'; })}>Pause</button>
        <button type="button" disabled={!!busy || !paused} onClick={() => act('Resume', async () => { await sb.resume(); return 'Resumed.'; })}>Resume</button>
      </div>
      <div class="action-row">
        <form class="inline" onSubmit={(e) => {
          e.preventDefault();
          void act('Snapshot', async () => {
            const s = await sb.snapshot(snapName.trim() ? { name: snapName.trim() } : {});
            return <>Snapshot <code>{s.name || s.id}</code> made; <Link to="/sandboxes">new sandboxes</Link> can start from it.</>;
          });
        }}>
          <label>Snapshot name <input name="snapshot-name" placeholder="optional" value={snapName} onInput={(e) => setSnapName((e.target as HTMLInputElement).value)} /></label>
          <button type="submit" disabled={!!busy || !(running || paused)}>Snapshot</button>
        </form>
        <button type="button" disabled={!!busy || !running} onClick={() => act('Fork', async () => {
          const f = await sb.fork();
          if (!f.ok) throw f.errors[0];
          const c = f.sandboxes[0]!;
          return <>Forked into <Link to={`/sandboxes/${encodeURIComponent(c.id)}`}><code>{c.id}</code></Link>.</>;
        })}>Fork</button>
        <ConfirmButton label="Delete" question="Delete this sandbox and its files?" disabled={!!busy} onConfirm={() => act('Delete', async () => {
          await sb.kill();
          navigate('/sandboxes');
        })} />
      </div>
      <p aria-live="polite" class="status">{busy ? `${busy}…` : done}</p>
      <ErrorNote error={error} onDismiss={() => setError(undefined)} />
    </section>
  );
}

export function SandboxPage({ session, id, tab }: { session: Session; id: string; tab: string }) {
  const [info, setInfo] = useState<SandboxInfo | undefined>();
  const [samples, setSamples] = useState<MetricSample[]>([]);
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);
  const sb = new Sandbox(id, session.client);

  usePoll(async (signal) => {
    try {
      const i = await sb.getInfo({ signal });
      setInfo(i);
      setError(undefined);
      if (i.state === 'running') setSamples(await sb.metrics({ signal }));
    } catch (e) {
      if (!signal.aborted) setError(e);
    }
  }, POLL_MS, [session, id, tick]);

  const base = `/sandboxes/${encodeURIComponent(id)}`;
  if (!info) {
    return (
      <section>
        <p><Link to="/sandboxes">← Sandboxes</Link></p>
        <h1><code>{id}</code></h1>
        {error ? <ErrorNote error={error} /> : <p aria-live="polite">Loading…</p>}
        {error instanceof NotFoundError && <p>It may have been deleted, or it is another team's.</p>}
      </section>
    );
  }
  return (
    <section aria-labelledby="sandbox-title">
      <p><Link to="/sandboxes">← Sandboxes</Link></p>
      <div class="page-head">
        <h1 id="sandbox-title"><code>{id}</code> <StateBadge state={info.state} /></h1>
      </div>
      <nav class="tabs" aria-label="Sandbox">
        {TABS.map((t) => <Link key={t.id} to={t.id === 'overview' ? base : `${base}/${t.id}`} aria-current={tab === t.id ? 'page' : undefined}>{t.label}</Link>)}
      </nav>
      <ErrorNote error={error} />
      {tab === 'overview' && (
        <>
          <div class="grid2">
            <section class="card" aria-labelledby="details-title"><h2 id="details-title">Details</h2><Details info={info} /></section>
            <section class="card" aria-labelledby="metrics-title"><h2 id="metrics-title">CPU and memory</h2>
              {info.state === 'running' ? <Metrics samples={samples} /> : <p class="muted">Measured while it runs.</p>}
            </section>
          </div>
          <Actions sb={sb} info={info} onChanged={() => setTick((t) => t + 1)} />
        </>
      )}
      {TABS.some((t) => t.id === tab && t.live) && info.state !== 'running' && (
        <p class="muted">This needs a running sandbox; this one is {info.state}.</p>
      )}
      {tab === 'terminal' && info.state === 'running' && <LazyTerminal sb={sb} />}
      {tab === 'files' && info.state === 'running' && <FilesView sb={sb} />}
      {tab === 'processes' && info.state === 'running' && <ProcessesView sb={sb} />}
      {tab === 'network' && <NetworkView sb={sb} />}
      {!TABS.some((t) => t.id === tab) && <p>No such tab.</p>}
    </section>
  );
}
