// SPDX-License-Identifier: Apache-2.0
// The console's routes are paths under /console/ (warrend answers index.html for each), moved
// between with the History API.
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';
const EVENT = 'warren:navigate';

/** The path's segments after /console/ (decoded). */
export function segments(): string[] {
  let p = location.pathname;
  if (p.startsWith(BASE)) p = p.slice(BASE.length);
  return p.split('/').filter(Boolean).map((s) => { try { return decodeURIComponent(s); } catch { return s; } });
}

export function href(path: string): string {
  return BASE + (path.startsWith('/') ? path : '/' + path);
}

export function navigate(path: string, replace = false): void {
  const url = href(path);
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  window.dispatchEvent(new Event(EVENT));
  window.scrollTo(0, 0);
}

/** The current route's segments; re-renders on navigation. */
export function useRoute(): string[] {
  const [segs, setSegs] = useState(segments);
  useEffect(() => {
    const on = () => setSegs(segments());
    window.addEventListener('popstate', on);
    window.addEventListener(EVENT, on);
    return () => { window.removeEventListener('popstate', on); window.removeEventListener(EVENT, on); };
  }, []);
  return segs;
}
