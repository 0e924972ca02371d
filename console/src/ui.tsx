// SPDX-License-Identifier: Apache-2.0
// Small pieces every page uses: the API's errors as it says them, state badges, charts, a
// two-step delete, polling.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { WarrenError } from '@warren/sdk';

/** An error as the API said it: its message, and its code and request id for a bug report. */
export function ErrorNote({ error, onDismiss }: { error: unknown; onDismiss?: () => void }) {
  if (error === undefined || error === null) return null;
  const e = error as Error;
  const w = error instanceof WarrenError ? error : undefined;
  return (
    <div class="error" role="alert">
      <p>
        <strong>{w ? 'The API said: ' : 'Error: '}</strong>
        <span class="error-message">{e.message || String(error)}</span>
      </p>
      {w && (
        <p class="error-meta">
          <code>{w.code}</code>
          {w.status !== undefined && <> · HTTP {w.status}</>}
          {w.requestId && <> · request <code>{w.requestId}</code></>}
        </p>
      )}
      {onDismiss && <button type="button" class="link" onClick={onDismiss}>Dismiss</button>}
    </div>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

/** A button that asks again before it acts ("Delete" → "Delete sandbox?" Yes / No). */
export function ConfirmButton({ label, question, onConfirm, disabled }: {
  label: string; question: string; onConfirm: () => void | Promise<void>; disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => { if (asking) yes.current?.focus(); }, [asking]);
  if (!asking) {
    return <button type="button" class="danger" disabled={disabled} onClick={() => setAsking(true)}>{label}</button>;
  }
  return (
    <span class="confirm" role="group" aria-label={question}>
      <span>{question}</span>
      <button type="button" class="danger" ref={yes} onClick={() => { setAsking(false); void onConfirm(); }}>Yes, {label.toLowerCase()}</button>
      <button type="button" onClick={() => setAsking(false)}>Cancel</button>
    </span>
  );
}

/** Run fn now and every `ms` while mounted (and while the tab is visible); deps restart it. */
export function usePoll(fn: (signal: AbortSignal) => Promise<void>, ms: number, deps: unknown[]): void {
  useEffect(() => {
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      if (ctrl.signal.aborted) return;
      if (document.visibilityState !== 'hidden') {
        try { await fn(ctrl.signal); } catch { /* fn shows its own errors */ }
      }
      if (!ctrl.signal.aborted) timer = setTimeout(run, ms);
    };
    void run();
    return () => { ctrl.abort(); if (timer) clearTimeout(timer); };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
}

/** A small line chart (SVG) of values over time, with its summary as the accessible name. */
export function Chart({ label, points, max, format, summary }: {
  label: string; points: { t: number; v: number }[]; max?: number; format: (v: number) => string; summary?: string;
}) {
  const w = 320, h = 80, pad = 2;
  const last = points.length ? points[points.length - 1]!.v : undefined;
  const peak = points.reduce((m, p) => Math.max(m, p.v), 0);
  const top = Math.max(max ?? 0, peak, 1e-9);
  // One sample is a level line across the chart.
  if (points.length === 1) points = [{ t: points[0]!.t - 1, v: points[0]!.v }, points[0]!];
  const t0 = points.length ? points[0]!.t : 0;
  const t1 = points.length ? points[points.length - 1]!.t : 1;
  const span = Math.max(t1 - t0, 1);
  const xy = points.map((p) => [pad + ((p.t - t0) / span) * (w - 2 * pad), h - pad - (p.v / top) * (h - 2 * pad)] as const);
  const line = xy.map(([x, y], i) => `${i ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`).join('');
  const area = xy.length ? `${line}L${xy[xy.length - 1]![0].toFixed(1)},${h - pad}L${xy[0]![0].toFixed(1)},${h - pad}Z` : '';
  const text = summary ?? (last === undefined ? `${label}: no samples yet` : `${label}: now ${format(last)}, peak ${format(peak)}`);
  return (
    <figure class="chart">
      <figcaption>
        <span>{label}</span>
        <strong>{last === undefined ? '—' : format(last)}</strong>
      </figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={text} preserveAspectRatio="none">
        <title>{text}</title>
        {area && <path d={area} class="chart-area" />}
        {line && <path d={line} class="chart-line" />}
      </svg>
    </figure>
  );
}

/** A labelled value in a definition list. */
export function Field({ name, children }: { name: string; children: ComponentChildren }) {
  return <><dt>{name}</dt><dd>{children}</dd></>;
}

/** A bar chart (SVG) of labelled values; each bar's title and the table beside it carry the
 * numbers for readers of either. */
export function BarChart({ label, bars, format }: { label: string; bars: { key: string; v: number }[]; format: (v: number) => string }) {
  const w = 640, barH = 22, gap = 8, labelW = 150, valueW = 110;
  const h = Math.max(bars.length, 1) * (barH + gap);
  const top = Math.max(...bars.map((b) => b.v), 1e-9);
  const summary = bars.length ? `${label}: ${bars.map((b) => `${b.key} ${format(b.v)}`).join(', ')}` : `${label}: nothing yet`;
  return (
    <figure class="bars">
      <figcaption>{label}</figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={summary} width="100%" style={{ maxHeight: `${h * 1.2}px` }}>
        <title>{summary}</title>
        {bars.map((b, i) => {
          const y = i * (barH + gap);
          const bw = Math.max(1, ((w - labelW - valueW) * b.v) / top);
          return (
            <g key={b.key} data-bar={b.key}>
              <title>{`${b.key}: ${format(b.v)}`}</title>
              <text x={labelW - 8} y={y + barH * 0.7} text-anchor="end" class="bar-label">{b.key.length > 20 ? b.key.slice(0, 19) + '…' : b.key}</text>
              <rect x={labelW} y={y} width={bw} height={barH} rx={3} class="bar" />
              <text x={labelW + bw + 6} y={y + barH * 0.7} class="bar-value">{format(b.v)}</text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

/** How much of a quota is used: a meter with its numbers in words. */
export function Quota({ label, used, limit, format }: { label: string; used: number; limit: number; format: (v: number) => string }) {
  if (limit <= 0) return <p><strong>{label}:</strong> {format(used)} (no quota)</p>;
  const pct = Math.round((100 * used) / limit);
  return (
    <div class="quota">
      <label>{label}: {format(used)} of {format(limit)} ({pct} %)
        <meter min={0} max={limit} value={used} low={limit * 0.7} high={limit * 0.9} optimum={0} />
      </label>
    </div>
  );
}
