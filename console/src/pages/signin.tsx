// SPDX-License-Identifier: Apache-2.0
// Sign in with an API key: checked with the daemon before it is kept; a refused key shows the
// API's own message.
import { useState } from 'preact/hooks';
import { type Session, signIn } from '../session';
import { ErrorNote } from '../ui';

export function SignIn({ onSignedIn, initialError }: { onSignedIn: (s: Session) => void; initialError?: unknown }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(initialError);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      onSignedIn(await signIn(key));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="signin">
      <form onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Warren console</h1>
        <p class="muted">Sign in with an API key. It is kept in this tab only, and every call is made with it: the console can do what the key can, nothing more.</p>
        <label for="api-key">API key</label>
        <input id="api-key" name="api-key" type="password" autocomplete="off" spellcheck={false}
          required value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)}
          placeholder="wr_…" aria-describedby="api-key-help" />
        <p id="api-key-help" class="muted small">An admin's key is in <code>/var/lib/warren/admin.key</code> on the host; <code>warren</code> keys are made with <code>POST /v1/keys</code>.</p>
        <button type="submit" class="primary" disabled={busy}>{busy ? 'Checking…' : 'Sign in'}</button>
        <ErrorNote error={error} />
      </form>
    </main>
  );
}
