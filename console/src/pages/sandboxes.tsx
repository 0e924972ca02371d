// SPDX-License-Identifier: Apache-2.0
// The team's sandboxes, live: state, template, age, time left, and CPU and memory now (from each
// running sandbox's metrics route), filtered by state and metadata; and a form to create one.
import { useState } from 'preact/hooks';
import { Sandbox, type SandboxInfo, Template } from '@warren/sdk';
import { bytes, duration, percent, since } from '../format';
import { parseMetadata, showMetadata } from '../meta';
import { navigate } from '../router';
import type { Session } from '../session';
import { Link } from '../shell';
import { ConfirmButton, ErrorNote, StateBadge, usePoll } from '../ui';

const POLL_MS = 3000;
const METRICS_AT_MOST = 50;

const STATE_FILTERS: Record<string, string[]> = {
  live: ['creating', 'running', 'paused'],
  running: ['running'],
  paused: ['paused'],
  stopped: ['stopped'],
  error: ['error'],
  all: ['creating', 'running', 'paused', 'stopped', 'error'],
};

interface Now { cpuPct: number; memoryBytes: number; memoryLimitBytes: number }

function timeLeft(s: SandboxInfo, now: number): string {
  if (s.state === 'paused') return 'paused';
  if (s.state !== 'running' && s.state !== 'creating') return '—';
  const left = s.expiresAt ? s.expiresAt.getTime() - now : s.remainingMs;
  return duration(left);
}

function CreateForm({ session, onCreated }: { session: Session; onCreated: (s: Sandbox) => void }) {
  const [template, setTemplate] = useState('base');
  const [timeout, setTimeoutS] = useState('300');
  const [cpus, setCpus] = useState('');
  const [memory, setMemory] = useState('');
  const [metadata, setMetadata] = useState('');
  const [network, setNetwork] = useState('default');
  const [templates, setTemplates] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();

  usePoll(async (signal) => {
    const t = await Template.list({ client: session.client, signal });
    setTemplates(t.map((x) => x.name));
  }, 60_000, [session]);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const opts: Parameters<typeof Sandbox.create>[1] = { client: session.client, template: template.trim() || 'base' };
      if (timeout.trim()) opts.timeout = Number(timeout);
      if (cpus.trim()) opts.cpus = Number(cpus);
      if (memory.trim()) opts.memoryMb = Number(memory);
      if (metadata.trim()) opts.metadata = parseMetadata(metadata);
      if (network === 'internet') { opts.network = true; opts.internet = true; }
      else if (network === 'no-internet') { opts.network = true; opts.internet = false; }
      else if (network === 'loopback') opts.network = false;
      onCreated(await Sandbox.create(opts));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="card create" onSubmit={submit} aria-labelledby="create-title">
      <h2 id="create-title">New sandbox</h2>
      <div class="fields">
        <label>Template
          <input name="template" list="template-names" value={template} onInput={(e) => setTemplate((e.target as HTMLInputElement).value)} />
          <datalist id="template-names">{templates.map((t) => <option key={t} value={t} />)}</datalist>
        </label>
        <label>Timeout (s)
          <input name="timeout" type="number" min={1} inputMode="numeric" value={timeout} onInput={(e) => setTimeoutS((e.target as HTMLInputElement).value)} />
        </label>
        <label>vCPUs
          <input name="cpus" type="number" min={0.01} step="any" placeholder="default" value={cpus} onInput={(e) => setCpus((e.target as HTMLInputElement).value)} />
        </label>
        <label>Memory (MiB)
          <input name="memory" type="number" min={1} inputMode="numeric" placeholder="default" value={memory} onInput={(e) => setMemory((e.target as HTMLInputElement).value)} />
        </label>
        <label>Network
          <select name="network" value={network} onChange={(e) => setNetwork((e.target as HTMLSelectElement).value)}>
            <option value="default">the daemon's default</option>
            <option value="internet">its own, with internet</option>
            <option value="no-internet">its own, no internet</option>
            <option value="loopback">loopback only</option>
          </select>
        </label>
        <label class="wide">Metadata
          <input name="metadata" placeholder="key=value, …" value={metadata} onInput={(e) => setMetadata((e.target as HTMLInputElement).value)} />
        </label>
      </div>
      <button type="submit" class="primary" disabled={busy}>{busy ? 'Creating…' : 'Create sandbox'}</button>
      <ErrorNote error={error} />
    </form>
  );
}

export function SandboxList({ session }: { session: Session }) {
  const [stateFilter, setStateFilter] = useState('live');
  const [metaText, setMetaText] = useState('');
  const [rows, setRows] = useState<SandboxInfo[] | undefined>();
  const [metrics, setMetrics] = useState<Record<string, Now>>({});
  const [error, setError] = useState<unknown>();
  const [actionError, setActionError] = useState<unknown>();
  const [now, setNow] = useState(Date.now());
  const [tick, setTick] = useState(0);

  usePoll(async (signal) => {
    let metadata: Record<string, string>;
    try { metadata = parseMetadata(metaText); } catch (e) { setError(new Error(`metadata filter: ${(e as Error).message}`)); return; }
    try {
      const list: SandboxInfo[] = [];
      for await (const s of Sandbox.list({ client: session.client, state: STATE_FILTERS[stateFilter], metadata, limit: 500, signal })) list.push(s);
      if (signal.aborted) return;
      setRows(list);
      setNow(Date.now());
      setError(undefined);
      const running = list.filter((s) => s.state === 'running').slice(0, METRICS_AT_MOST);
      const got = await Promise.allSettled(running.map((s) => new Sandbox(s.id, session.client).metrics({ signal })));
      if (signal.aborted) return;
      const m: Record<string, Now> = {};
      got.forEach((r, i) => {
        if (r.status !== 'fulfilled' || !r.value.length) return;
        const last = r.value[r.value.length - 1]!;
        m[running[i]!.id] = { cpuPct: last.cpuPct, memoryBytes: last.memoryBytes, memoryLimitBytes: last.memoryLimitBytes };
      });
      setMetrics(m);
    } catch (e) {
      if (!signal.aborted) setError(e);
    }
  }, POLL_MS, [session, stateFilter, metaText, tick]);

  async function remove(id: string) {
    setActionError(undefined);
    try {
      await new Sandbox(id, session.client).kill();
      setTick((t) => t + 1);
    } catch (e) { setActionError(e); }
  }

  return (
    <section aria-labelledby="sandboxes-title">
      <div class="page-head">
        <h1 id="sandboxes-title">Sandboxes</h1>
        <form class="filters" role="search" aria-label="Filter sandboxes" onSubmit={(e) => {
          e.preventDefault();
          setMetaText(String(new FormData(e.currentTarget as HTMLFormElement).get('metadata-filter') ?? ''));
        }}>
          <label>State
            <select name="state" value={stateFilter} onChange={(e) => setStateFilter((e.target as HTMLSelectElement).value)}>
              <option value="live">creating, running, paused</option>
              <option value="running">running</option>
              <option value="paused">paused</option>
              <option value="stopped">stopped</option>
              <option value="error">error</option>
              <option value="all">all</option>
            </select>
          </label>
          <label>Filter by metadata
            <input name="metadata-filter" placeholder="key=value" defaultValue={metaText} onChange={(e) => setMetaText((e.target as HTMLInputElement).value)} />
          </label>
        </form>
      </div>
      <ErrorNote error={error} />
      <ErrorNote error={actionError} onDismiss={() => setActionError(undefined)} />
      {rows === undefined ? <p aria-live="polite">Loading…</p> : rows.length === 0 ? (
        <p class="empty">No sandboxes{stateFilter !== 'all' ? ' in this state' : ''}{metaText ? ' with this metadata' : ''}.</p>
      ) : (
        <table class="list sandboxes" aria-describedby="sandboxes-title">
          <thead>
            <tr><th scope="col">Sandbox</th><th scope="col">State</th><th scope="col">Template</th><th scope="col">Age</th>
              <th scope="col">Time left</th><th scope="col">CPU</th><th scope="col">Memory</th><th scope="col"><span class="sr-only">Actions</span></th></tr>
          </thead>
          <tbody>
            {rows.map((s) => {
              const m = metrics[s.id];
              return (
                <tr key={s.id} data-sandbox={s.id}>
                  <th scope="row" data-label="Sandbox">
                    <Link to={`/sandboxes/${encodeURIComponent(s.id)}`}><code>{s.id}</code></Link>
                    {Object.keys(s.metadata).length > 0 && <div class="muted small">{showMetadata(s.metadata)}</div>}
                  </th>
                  <td data-label="State"><StateBadge state={s.state} /></td>
                  <td data-label="Template">{s.template}</td>
                  <td data-label="Age">{duration(since(s.createdAt, now))}</td>
                  <td data-label="Time left">{timeLeft(s, now)}</td>
                  <td data-label="CPU">{m ? percent(m.cpuPct) : '—'}</td>
                  <td data-label="Memory">{m ? `${bytes(m.memoryBytes)} / ${bytes(m.memoryLimitBytes || s.memoryMb * 1048576)}` : '—'}</td>
                  <td data-label="Actions"><ConfirmButton label="Delete" question={`Delete ${s.id}?`} onConfirm={() => remove(s.id)} /></td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <CreateForm session={session} onCreated={(sb) => navigate(`/sandboxes/${encodeURIComponent(sb.id)}`)} />
    </section>
  );
}
