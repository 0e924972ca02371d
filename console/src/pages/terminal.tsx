// SPDX-License-Identifier: Apache-2.0
// A terminal in the page: xterm.js over the terminal WebSocket the SDK opens
// (sb.terminal()), sized to its box and resized with it.
import { useEffect, useRef, useState } from 'preact/hooks';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal as XTerm } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import type { Sandbox, Terminal } from '@warren/sdk';
import { ErrorNote } from '../ui';

export function TerminalView({ sb }: { sb: Sandbox }) {
  const box = useRef<HTMLDivElement>(null);
  const after = useRef<HTMLParagraphElement>(null);
  const [status, setStatus] = useState('Connecting…');
  const [error, setError] = useState<unknown>();
  const [generation, setGeneration] = useState(0);
  const [ended, setEnded] = useState(false);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xterm = new XTerm({
      cursorBlink: true,
      convertEol: false,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace',
      fontSize: 14,
      scrollback: 5000,
      theme: { background: '#0f1419', foreground: '#e6e6e6', cursor: '#f0c674', selectionBackground: '#3a4a5a' },
    });
    const fit = new FitAddon();
    xterm.loadAddon(fit);
    xterm.open(el);
    xterm.textarea?.setAttribute('aria-label', 'Terminal input (F6 leaves the terminal)');
    // Tab belongs to the shell: F6 moves the focus out of the terminal instead.
    xterm.attachCustomKeyEventHandler((e) => {
      if (e.key !== 'F6') return true;
      if (e.type === 'keydown') after.current?.focus();
      return false;
    });
    try { fit.fit(); } catch { /* not laid out yet */ }
    let term: Terminal | undefined;
    let closed = false;
    setEnded(false);
    setError(undefined);
    setStatus('Connecting…');
    const input = xterm.onData((d) => term?.write(d));
    const binary = xterm.onBinary((d) => term?.write(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    const resize = xterm.onResize(({ rows, cols }) => term?.resize(rows, cols));
    const observer = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
    observer.observe(el);
    sb.terminal({
      rows: xterm.rows,
      cols: xterm.cols,
      onData: (b) => xterm.write(b),
      onExit: (e) => {
        if (closed) return;
        const how = e.exitCode !== undefined ? `exited with code ${e.exitCode}` : e.signal !== undefined ? `was killed by signal ${e.signal}` : 'was disconnected';
        xterm.write(`\r\n\x1b[2m[the terminal ${how}]\x1b[0m\r\n`);
        setStatus(`The terminal ${how}.`);
        setEnded(true);
      },
    }).then((t) => {
      if (closed) { t.close(); return; }
      term = t;
      setStatus('Connected.');
      xterm.focus();
    }, (e) => {
      if (closed) return;
      setError(e);
      setStatus('Not connected.');
      setEnded(true);
    });
    return () => {
      closed = true;
      observer.disconnect();
      input.dispose();
      binary.dispose();
      resize.dispose();
      term?.close();
      xterm.dispose();
    };
  }, [sb.id, generation]);

  return (
    <section class="terminal-section" aria-labelledby="terminal-title">
      <div class="terminal-head">
        <h2 id="terminal-title">Terminal</h2>
        <span class="muted" aria-live="polite" data-testid="terminal-status">{status}</span>
        {ended && <button type="button" onClick={() => setGeneration((g) => g + 1)}>Reconnect</button>}
      </div>
      <ErrorNote error={error} />
      <div class="terminal" ref={box} role="region" aria-label="Terminal output" data-testid="terminal" />
      <p class="muted small" tabIndex={-1} ref={after}>The keyboard goes to the terminal while it has the focus (Tab included); F6 moves the focus out of it, to here.</p>
    </section>
  );
}
