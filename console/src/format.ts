// SPDX-License-Identifier: Apache-2.0
// Numbers as people read them: durations, sizes, percentages, times.

export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function percent(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  return `${v >= 10 ? Math.round(v) : v.toFixed(1)} %`;
}

export function time(d: Date | undefined): string {
  return d ? d.toLocaleString() : '—';
}

export function since(d: Date | undefined, now = Date.now()): number | undefined {
  return d ? now - d.getTime() : undefined;
}
