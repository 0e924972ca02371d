// SPDX-License-Identifier: Apache-2.0
// Signing in: the API key is kept in the tab's session storage (gone when the tab closes) and
// sent as a bearer token by the SDK's Client on every call; the console has no other
// credential. Who the key is comes from GET /v1/version (its team, whether it is an admin's).
import { Client } from '@warren/sdk';

const STORAGE_KEY = 'warren.console.key';

export interface Session {
  client: Client;
  team: string;
  admin: boolean;
  version: string;
}

export function storedKey(): string | null {
  try { return sessionStorage.getItem(STORAGE_KEY); } catch { return null; }
}

/** A client for the daemon that served the page, with `key`. */
export function clientFor(key: string): Client {
  return new Client({ apiUrl: location.origin, apiKey: key, maxRetries: 1, timeoutMs: 30_000 });
}

/** Check the key with the daemon; keep it for this tab once it is good. Throws the API's error
 * (AuthenticationError: "the API key is not valid"). */
export async function signIn(key: string): Promise<Session> {
  const client = clientFor(key.trim());
  const v = await client.version();
  try { sessionStorage.setItem(STORAGE_KEY, key.trim()); } catch { /* private mode: this page only */ }
  return { client, team: v.team, admin: v.admin, version: v.version };
}

export function signOut(): void {
  try { sessionStorage.removeItem(STORAGE_KEY); } catch { /* nothing kept */ }
}
