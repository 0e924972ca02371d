// SPDX-License-Identifier: Apache-2.0
// Templates and snapshots: the team's, with their sizes and use; delete; and a build from a
// pasted Dockerfile whose steps and output stream into a log as the daemon runs them.
import { useRef, useState } from 'preact/hooks';
import { BuildError, Snapshot, Template } from '@warren/sdk';
import { bytes, time } from '../format';
import type { Session } from '../session';
import { ConfirmButton, ErrorNote, usePoll } from '../ui';

const EXAMPLE = 'FROM base\nUSER root\nRUN echo "hello from a template" > /hello.txt\n';

function Build({ session, onBuilt }: { session: Session; onBuilt: () => void }) {
  const [name, setName] = useState('');
  const [dockerfile, setDockerfile] = useState(EXAMPLE);
  const [replace, setReplace] = useState(false);
  const [log, setLog] = useState('');
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState('');
  const [error, setError] = useState<unknown>();
  const pre = useRef<HTMLPreElement>(null);

  function append(s: string) {
    setLog((l) => l + s);
    requestAnimationFrame(() => { if (pre.current) pre.current.scrollTop = pre.current.scrollHeight; });
  }

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    setResult('');
    setLog('');
    try {
      const t = await Template.build(name.trim(), {
        client: session.client, dockerfile, replace,
        onStep: (s) => append(`Step ${s.step}/${s.of} (line ${s.line}): ${s.instruction}${s.cached ? '  [cached]' : ''}\n`),
        onOutput: (_stream, text) => append(text),
      });
      setResult(`Built template ${t.name}: ${t.layers} layers, ${bytes(t.sizeBytes)}.`);
      append(`\nBuilt ${t.name}.\n`);
      onBuilt();
    } catch (err) {
      if (err instanceof BuildError) append(`\nThe build failed${err.step ? ` at step ${err.step}` : ''}: ${err.message}\n`);
      setError(err);
    } finally { setBusy(false); }
  }

  return (
    <form class="card build" onSubmit={submit} aria-labelledby="build-title">
      <h2 id="build-title">Build a template</h2>
      <div class="fields">
        <label>Name
          <input name="template-name" required pattern="[A-Za-z0-9][A-Za-z0-9._-]*" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </label>
        <label class="check"><input type="checkbox" name="replace" checked={replace} onChange={(e) => setReplace((e.target as HTMLInputElement).checked)} /> Replace a template of that name</label>
        <label class="wide">Dockerfile (FROM, RUN, ENV, WORKDIR, USER; no COPY without a context)
          <textarea name="dockerfile" rows={8} spellcheck={false} value={dockerfile} onInput={(e) => setDockerfile((e.target as HTMLTextAreaElement).value)} />
        </label>
      </div>
      <button type="submit" class="primary" disabled={busy}>{busy ? 'Building…' : 'Build'}</button>
      <p aria-live="polite" class="status">{result}</p>
      <ErrorNote error={error} />
      {(log || busy) && (
        <pre class="log" ref={pre} role="log" aria-label="Build log" tabIndex={0} data-testid="build-log">{log || 'Waiting for the daemon…'}</pre>
      )}
    </form>
  );
}

export function TemplatesPage({ session }: { session: Session }) {
  const [templates, setTemplates] = useState<Template[] | undefined>();
  const [snapshots, setSnapshots] = useState<Snapshot[] | undefined>();
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);

  usePoll(async (signal) => {
    try {
      const [t, s] = await Promise.all([Template.list({ client: session.client, signal }), Snapshot.list({ client: session.client, signal })]);
      setTemplates(t.sort((a, b) => a.name.localeCompare(b.name)));
      setSnapshots(s);
      setError(undefined);
    } catch (e) { if (!signal.aborted) setError(e); }
  }, 10_000, [session, tick]);

  async function del(fn: () => Promise<void>) {
    setError(undefined);
    try { await fn(); setTick((t) => t + 1); } catch (e) { setError(e); }
  }

  return (
    <section aria-labelledby="templates-title">
      <h1 id="templates-title">Templates and snapshots</h1>
      <ErrorNote error={error} onDismiss={() => setError(undefined)} />
      <h2>Templates</h2>
      {templates === undefined ? <p aria-live="polite">Loading…</p> : (
        <table class="list" aria-label="Templates">
          <thead><tr><th scope="col">Name</th><th scope="col">Kind</th><th scope="col">Size</th><th scope="col">Layers</th><th scope="col">Created</th><th scope="col">Sandboxes</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {templates.map((t) => (
              <tr key={t.name} data-template={t.name}>
                <th scope="row" data-label="Name"><code>{t.name}</code>{t.shared && <span class="badge">shared</span>}</th>
                <td data-label="Kind">{t.kind}</td>
                <td data-label="Size">{bytes(t.sizeBytes)}</td>
                <td data-label="Layers">{t.layers}</td>
                <td data-label="Created">{time(t.createdAt)}</td>
                <td data-label="Sandboxes">{t.inUse}</td>
                <td data-label="Actions"><ConfirmButton label="Delete" question={`Delete template ${t.name}?`} onConfirm={() => del(() => Template.delete(t.name, { client: session.client }))} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2 class="spaced">Snapshots</h2>
      {snapshots === undefined ? <p aria-live="polite">Loading…</p> : snapshots.length === 0 ? <p class="empty">No snapshots: a sandbox's Snapshot action makes one.</p> : (
        <table class="list" aria-label="Snapshots">
          <thead><tr><th scope="col">Snapshot</th><th scope="col">Name</th><th scope="col">Of sandbox</th><th scope="col">Size</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {snapshots.map((s) => (
              <tr key={s.id} data-snapshot={s.id}>
                <th scope="row" data-label="Snapshot"><code>{s.id}</code></th>
                <td data-label="Name">{s.name ?? '—'}</td>
                <td data-label="Of sandbox">{s.sandboxId ? <code>{s.sandboxId}</code> : '—'}</td>
                <td data-label="Size">{bytes(s.sizeBytes)}</td>
                <td data-label="Created">{time(s.createdAt)}</td>
                <td data-label="Actions"><ConfirmButton label="Delete" question={`Delete snapshot ${s.name ?? s.id}?`} onConfirm={() => del(() => Snapshot.delete(s.id, { client: session.client }))} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Build session={session} onBuilt={() => setTick((t) => t + 1)} />
    </section>
  );
}
