// SPDX-License-Identifier: Apache-2.0
// Usage: the ledger's sums (GET /v1/usage) per day, per template and per sandbox for the team (an
// admin: any team, or every team), as charts and tables, with a CSV download; and the team's
// limits and how close it is to them.
import { useState } from 'preact/hooks';
import { Sandbox, type TeamLimits, type UsageRow } from '@warren/sdk';
import { bytes, duration } from '../format';
import type { Session } from '../session';
import { BarChart, ErrorNote, Quota, usePoll } from '../ui';

const RANGES: Record<string, number> = { '1': 1, '7': 7, '30': 30, '90': 90 };

function seconds(v: number): string {
  return v < 600 ? `${v.toFixed(v < 10 ? 1 : 0)} s` : duration(v * 1000);
}

function Table({ rows, keyName, label }: { rows: UsageRow[]; keyName: 'day' | 'template' | 'sandbox'; label: string }) {
  if (!rows.length) return <p class="empty">No usage in this span.</p>;
  return (
    <table class="list usage" aria-label={label}>
      <thead><tr><th scope="col">{keyName[0]!.toUpperCase() + keyName.slice(1)}</th><th scope="col">Team</th><th scope="col">Running</th><th scope="col">Paused</th>
        <th scope="col">vCPU-s</th><th scope="col">CPU-s used</th><th scope="col">GiB-s</th><th scope="col">Peak memory</th></tr></thead>
      <tbody>
        {rows.map((r) => (
          <tr key={`${r.team}/${r[keyName]}`} data-usage={r[keyName]}>
            <th scope="row" data-label={keyName}>{keyName === 'sandbox' ? <code>{r.sandbox}</code> : r[keyName] ?? '—'}</th>
            <td data-label="Team">{r.team}</td>
            <td data-label="Running">{seconds(r.sandboxSeconds)}</td>
            <td data-label="Paused">{seconds(r.pausedSeconds)}</td>
            <td data-label="vCPU-s">{r.vcpuSeconds.toFixed(1)}</td>
            <td data-label="CPU-s used">{r.cpuSeconds.toFixed(2)}</td>
            <td data-label="GiB-s">{r.gibSeconds.toFixed(1)}</td>
            <td data-label="Peak memory">{bytes(r.peakMemoryBytes)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Sum rows by a key (an admin's every-team view has a row per team and key). */
function sumBy(rows: UsageRow[], key: 'day' | 'template'): { key: string; v: number }[] {
  const m = new Map<string, number>();
  for (const r of rows) { const k = r[key] ?? '—'; m.set(k, (m.get(k) ?? 0) + r.sandboxSeconds); }
  return [...m].map(([k, v]) => ({ key: k, v }));
}

function Limits({ session, team }: { session: Session; team: string }) {
  const [limits, setLimits] = useState<TeamLimits | undefined>();
  const [live, setLive] = useState<{ n: number; mem: number } | undefined>();
  const [error, setError] = useState<unknown>();
  usePoll(async (signal) => {
    try {
      const l = await session.client.teamLimits(team, { signal });
      let n = 0, mem = 0;
      if (team === session.team) {
        for await (const s of Sandbox.list({ client: session.client, state: ['creating', 'running', 'paused'], signal })) {
          if (s.state === 'paused' && s.pausedMode === 'disk') continue;
          n++;
          mem += s.memoryMb;
        }
      }
      setLimits(l);
      setLive(team === session.team ? { n, mem } : undefined);
      setError(undefined);
    } catch (e) { if (!signal.aborted) setError(e); }
  }, 10_000, [session, team]);
  return (
    <section class="card" aria-labelledby="limits-title">
      <h2 id="limits-title">Limits of team {team}</h2>
      <ErrorNote error={error} />
      {limits && (
        <>
          {live ? (
            <>
              <Quota label="Sandboxes now" used={live.n} limit={limits.maxSandboxes} format={(v) => String(v)} />
              <Quota label="Memory committed" used={live.mem * 1048576} limit={limits.maxMemoryMb * 1048576} format={bytes} />
            </>
          ) : (
            <p>At most {limits.maxSandboxes || 'any number of'} sandboxes and {limits.maxMemoryMb ? bytes(limits.maxMemoryMb * 1048576) : 'any amount'} of memory at once.</p>
          )}
          <p class="muted small">
            Requests: {limits.requests.rate ? `${limits.requests.rate}/s, bursts of ${limits.requests.burst}` : 'no limit'} ·
            Creates: {limits.creates.rate ? `${limits.creates.rate}/s, bursts of ${limits.creates.burst}` : 'no limit'} ·
            File bytes: {limits.bytes.rate ? `${bytes(limits.bytes.rate)}/s, bursts of ${bytes(limits.bytes.burst)}` : 'no limit'}
            {Object.keys(limits.overrides).length > 0 && ' (set for this team by the operator)'}
          </p>
        </>
      )}
    </section>
  );
}

export function UsagePage({ session }: { session: Session }) {
  const [days, setDays] = useState('7');
  const [teamDraft, setTeamDraft] = useState(session.admin ? '' : session.team);
  const [team, setTeam] = useState(session.admin ? '' : session.team);
  const [byDay, setByDay] = useState<UsageRow[] | undefined>();
  const [byTemplate, setByTemplate] = useState<UsageRow[] | undefined>();
  const [bySandbox, setBySandbox] = useState<UsageRow[] | undefined>();
  const [billed, setBilled] = useState('');
  const [error, setError] = useState<unknown>();

  const from = () => new Date(Date.now() - RANGES[days]! * 86_400_000);
  const teamOpt = session.admin ? { team } : {};

  usePoll(async (signal) => {
    try {
      const c = session.client;
      const f = from();
      const [d, t, s] = await Promise.all([
        c.usage({ groupBy: 'day', from: f, signal, ...teamOpt }),
        c.usage({ groupBy: 'template', from: f, signal, ...teamOpt }),
        c.usage({ groupBy: 'sandbox', from: f, signal, ...teamOpt }),
      ]);
      setByDay(d.rows.sort((a, b) => (a.day ?? '').localeCompare(b.day ?? '')));
      setByTemplate(t.rows.sort((a, b) => b.sandboxSeconds - a.sandboxSeconds));
      setBySandbox(s.rows.sort((a, b) => b.sandboxSeconds - a.sandboxSeconds));
      setBilled(d.billedSeconds);
      setError(undefined);
    } catch (e) { if (!signal.aborted) setError(e); }
  }, 15_000, [session, days, team]);

  async function csv(groupBy: 'day' | 'template' | 'sandbox') {
    setError(undefined);
    try {
      const text = await session.client.usageCsv({ groupBy, from: from(), ...teamOpt });
      const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `warren-usage-${team || (session.admin ? 'all-teams' : session.team)}-by-${groupBy}.csv`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) { setError(e); }
  }

  return (
    <section aria-labelledby="usage-title">
      <div class="page-head">
        <h1 id="usage-title">Usage</h1>
        <form class="filters" aria-label="Usage span" onSubmit={(e) => { e.preventDefault(); setTeam(teamDraft.trim()); }}>
          <label>Span
            <select name="span" value={days} onChange={(e) => setDays((e.target as HTMLSelectElement).value)}>
              <option value="1">the last day</option>
              <option value="7">the last 7 days</option>
              <option value="30">the last 30 days</option>
              <option value="90">the last 90 days</option>
            </select>
          </label>
          {session.admin && (
            <label>Team (empty: every team)
              <input name="team" value={teamDraft} onInput={(e) => setTeamDraft((e.target as HTMLInputElement).value)} onChange={(e) => setTeam((e.target as HTMLInputElement).value.trim())} />
            </label>
          )}
        </form>
      </div>
      <p class="muted small">Closed intervals of the usage ledger (one closes at every state change and every minute while a sandbox lives); billed vCPU-seconds count the <strong>{billed || '…'}</strong> CPU (docs/usage.md).</p>
      <ErrorNote error={error} />
      <div class="grid2">
        <section class="card" aria-labelledby="by-day-title">
          <h2 id="by-day-title">Running seconds per day</h2>
          {byDay ? <BarChart label="Running seconds per day" bars={sumBy(byDay, 'day')} format={seconds} /> : <p aria-live="polite">Loading…</p>}
          <button type="button" onClick={() => void csv('day')}>Download CSV (per day)</button>
        </section>
        <section class="card" aria-labelledby="by-template-title">
          <h2 id="by-template-title">Running seconds per template</h2>
          {byTemplate ? <BarChart label="Running seconds per template" bars={sumBy(byTemplate, 'template')} format={seconds} /> : <p aria-live="polite">Loading…</p>}
          <button type="button" onClick={() => void csv('template')}>Download CSV (per template)</button>
        </section>
      </div>
      <h2 class="spaced">Per day</h2>
      {byDay && <Table rows={byDay} keyName="day" label="Usage per day" />}
      <h2 class="spaced">Per sandbox</h2>
      {bySandbox && <Table rows={bySandbox} keyName="sandbox" label="Usage per sandbox" />}
      <button type="button" class="spaced" onClick={() => void csv('sandbox')}>Download CSV (per sandbox)</button>
      {(!session.admin || team) && <Limits session={session} team={session.admin ? team : session.team} />}
    </section>
  );
}
