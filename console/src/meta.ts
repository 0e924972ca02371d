// SPDX-License-Identifier: Apache-2.0
// Metadata as people type it: `key=value` pairs, separated by commas or spaces.

export function parseMetadata(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(/[,\s]+/).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`"${part}" is not key=value`);
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

export function showMetadata(m: Record<string, string>): string {
  return Object.entries(m).map(([k, v]) => `${k}=${v}`).join(', ');
}
