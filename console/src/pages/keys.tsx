// SPDX-License-Identifier: Apache-2.0
// API keys and volumes: the team's keys (an admin: every team's), made (admin keys only, as the
// API allows), shown once, revoked; the team's volumes, made and deleted.
import { useState } from 'preact/hooks';
import { type ApiKey, Volume, type VolumeInfo, admin } from '@warren/sdk';
import { bytes, time } from '../format';
import type { Session } from '../session';
import { ConfirmButton, ErrorNote, usePoll } from '../ui';

function NewKey({ session, onMade }: { session: Session; onMade: () => void }) {
  const [team, setTeam] = useState(session.team);
  const [name, setName] = useState('');
  const [isAdmin, setIsAdmin] = useState(false);
  const [made, setMade] = useState<ApiKey | undefined>();
  const [error, setError] = useState<unknown>();

  async function submit(e: Event) {
    e.preventDefault();
    setError(undefined);
    setMade(undefined);
    try {
      setMade(await admin.createKey(team.trim(), { client: session.client, name: name.trim() || undefined, admin: isAdmin }));
      onMade();
    } catch (err) { setError(err); }
  }

  return (
    <form class="card" onSubmit={submit} aria-labelledby="newkey-title">
      <h2 id="newkey-title">New key</h2>
      {!session.admin && <p class="muted">Only an admin's key can make keys; the API will say so.</p>}
      <div class="fields">
        <label>Team<input name="key-team" required value={team} onInput={(e) => setTeam((e.target as HTMLInputElement).value)} /></label>
        <label>Name<input name="key-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} /></label>
        <label class="check"><input type="checkbox" name="key-admin" checked={isAdmin} onChange={(e) => setIsAdmin((e.target as HTMLInputElement).checked)} /> Admin key</label>
      </div>
      <button type="submit" class="primary">Make the key</button>
      <ErrorNote error={error} />
      {made?.key && (
        <div class="card secret" role="status">
          <p><strong>The key of {made.team}, shown this once:</strong></p>
          <p><code data-testid="new-key">{made.key}</code></p>
          <button type="button" onClick={() => void navigator.clipboard?.writeText(made.key!)}>Copy</button>
        </div>
      )}
    </form>
  );
}

export function KeysPage({ session }: { session: Session }) {
  const [keys, setKeys] = useState<ApiKey[] | undefined>();
  const [volumes, setVolumes] = useState<VolumeInfo[] | undefined>();
  const [volName, setVolName] = useState('');
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);

  usePoll(async (signal) => {
    try {
      const [k, v] = await Promise.all([admin.listKeys({ client: session.client, signal }), Volume.list({ client: session.client, signal })]);
      setKeys(k);
      setVolumes(v);
      setError(undefined);
    } catch (e) { if (!signal.aborted) setError(e); }
  }, 15_000, [session, tick]);

  async function act(fn: () => Promise<unknown>) {
    setError(undefined);
    try { await fn(); setTick((t) => t + 1); } catch (e) { setError(e); }
  }

  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">Keys and volumes</h1>
      <ErrorNote error={error} onDismiss={() => setError(undefined)} />
      <h2>API keys{session.admin ? ' (every team)' : ` of ${session.team}`}</h2>
      {keys === undefined ? <p aria-live="polite">Loading…</p> : (
        <table class="list" aria-label="API keys">
          <thead><tr><th scope="col">Key</th><th scope="col">Team</th><th scope="col">Name</th><th scope="col">Admin</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.id} data-key={k.id}>
                <th scope="row" data-label="Key"><code>{k.id}</code></th>
                <td data-label="Team">{k.team}</td>
                <td data-label="Name">{k.name || '—'}</td>
                <td data-label="Admin">{k.admin ? 'yes' : 'no'}</td>
                <td data-label="Created">{time(k.createdAt)}</td>
                <td data-label="Actions"><ConfirmButton label="Revoke" question={`Revoke ${k.id}${k.name ? ` (${k.name})` : ''}? Whoever uses it is refused from now on.`} onConfirm={() => act(() => admin.deleteKey(k.id, { client: session.client }))} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <NewKey session={session} onMade={() => setTick((t) => t + 1)} />
      <h2 class="spaced">Volumes</h2>
      {volumes === undefined ? <p aria-live="polite">Loading…</p> : volumes.length === 0 ? <p class="empty">No volumes.</p> : (
        <table class="list" aria-label="Volumes">
          <thead><tr><th scope="col">Volume</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {volumes.map((v) => (
              <tr key={v.name} data-volume={v.name}>
                <th scope="row" data-label="Volume"><code>{v.name}</code>{v.diskBytes !== undefined && <span class="muted"> {bytes(v.diskBytes)}</span>}</th>
                <td data-label="Created">{time(v.createdAt)}</td>
                <td data-label="Actions"><ConfirmButton label="Delete" question={`Delete volume ${v.name} and its files?`} onConfirm={() => act(() => Volume.delete(v.name, { client: session.client }))} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form class="inline card" onSubmit={(e) => { e.preventDefault(); void act(async () => { await Volume.create(volName.trim(), { client: session.client }); setVolName(''); }); }}>
        <label>New volume<input name="volume-name" required value={volName} onInput={(e) => setVolName((e.target as HTMLInputElement).value)} /></label>
        <button type="submit">Make the volume</button>
      </form>
    </section>
  );
}
