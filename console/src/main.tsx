// SPDX-License-Identifier: Apache-2.0
// The console's entry: restore the tab's session if it has one, else ask for a key.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { AuthenticationError } from '@warren/sdk';
import { type Session, signIn, signOut, storedKey } from './session';
import { SignIn } from './pages/signin';
import { Shell } from './shell';

function App() {
  const [session, setSession] = useState<Session | undefined>();
  const [restoring, setRestoring] = useState(() => storedKey() !== null);
  const [restoreError, setRestoreError] = useState<unknown>();

  useEffect(() => {
    const key = storedKey();
    if (key === null) return;
    signIn(key).then(setSession, (e) => {
      if (e instanceof AuthenticationError) signOut();
      setRestoreError(e);
    }).finally(() => setRestoring(false));
  }, []);

  if (restoring) return <main id="main" class="signin"><p aria-live="polite">Signing in…</p></main>;
  if (!session) return <SignIn onSignedIn={setSession} initialError={restoreError} />;
  return <Shell session={session} onSignOut={() => { signOut(); setSession(undefined); setRestoreError(undefined); }} />;
}

render(<App />, document.getElementById('app')!);
