// SPDX-License-Identifier: Apache-2.0
// The signed-in frame: a skip link, the navigation, who is signed in, and the page of the route.
import type { ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';
import { href, navigate, useRoute } from './router';
import type { Session } from './session';
import { SandboxList } from './pages/sandboxes';
import { SandboxPage } from './pages/sandbox';
import { TemplatesPage } from './pages/templates';
import { UsagePage } from './pages/usage';
import { KeysPage } from './pages/keys';

export function Link({ to, children, ...rest }: { to: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' | undefined }) {
  return (
    <a href={href(to)} {...rest} onClick={(e) => {
      if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault();
      navigate(to);
    }}>{children}</a>
  );
}

const SECTIONS: { path: string; label: string }[] = [
  { path: '/sandboxes', label: 'Sandboxes' },
  { path: '/templates', label: 'Templates' },
  { path: '/usage', label: 'Usage' },
  { path: '/keys', label: 'Keys and volumes' },
];

function NotFound() {
  return <section><h1>Not found</h1><p>The console has no page here. <Link to="/sandboxes">Go to the sandboxes.</Link></p></section>;
}

export function Shell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const section = route[0] ?? 'sandboxes';
  useEffect(() => { if (route.length === 0) navigate('/sandboxes', true); }, [route.length]);
  useEffect(() => {
    const titles: Record<string, string> = { sandboxes: route[1] ? `Sandbox ${route[1]}` : 'Sandboxes', templates: 'Templates', usage: 'Usage', keys: 'Keys and volumes' };
    document.title = `${titles[section] ?? 'Warren'} · Warren console`;
  }, [section, route[1]]);

  let page: ComponentChildren;
  if (section === 'sandboxes' && route.length === 1) page = <SandboxList session={session} />;
  else if (section === 'sandboxes' && route[1]) page = <SandboxPage session={session} id={route[1]} tab={route[2] ?? 'overview'} />;
  else if (section === 'templates' && route.length === 1) page = <TemplatesPage session={session} />;
  else if (section === 'usage' && route.length === 1) page = <UsagePage session={session} />;
  else if (section === 'keys' && route.length === 1) page = <KeysPage session={session} />;
  else if (route.length === 0) page = null;
  else page = <NotFound />;

  return (
    <>
      <a class="skip" href="#main">Skip to the content</a>
      <header class="top">
        <Link to="/sandboxes" class="brand">Warren</Link>
        <nav aria-label="Sections">
          <ul>
            {SECTIONS.map((s) => (
              <li key={s.path}><Link to={s.path} aria-current={'/' + section === s.path ? 'page' : undefined}>{s.label}</Link></li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>Team <strong data-testid="team">{session.team}</strong>{session.admin && <span class="badge">admin</span>}</span>
          <button type="button" onClick={onSignOut}>Sign out</button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>{page}</main>
    </>
  );
}
