// SPDX-License-Identifier: Apache-2.0
// Compose files (docs/compose.md): what `Sandbox.create({compose})` sends, and the context of
// files it may need, read from a directory.

/** A Compose file with what it needs: `file` its text (YAML or JSON), `env` the variables of its
 * `${VAR}` interpolation, `context` the files its `env_file` and bind volumes name, by relative
 * path (`"dir/": ""` is an empty directory; `composeContext(dir)` builds it). */
export interface ComposeSpec {
  file: string;
  env?: Record<string, string>;
  context?: Record<string, string>;
  /** How images that are OCI references are pulled (the first create pulls them into a template). */
  pull?: { insecure?: boolean; username?: string; password?: string };
}

/** The most entries (files and empty directories) composeContext puts in a context. */
export const CONTEXT_MAX_FILES = 512;
/** The most bytes of file content composeContext puts in a context. */
export const CONTEXT_MAX_BYTES = 8 << 20;

/** The files of directory `dir` as a Compose context (Node only), with the rules of `warren
 * create --context DIR`: every regular file by its path relative to `dir`, as text, and each
 * empty directory as `"dir/": ""`. Hidden entries (`.git`, `.env`, ...), symlinks and special
 * files are left out. A file that is not UTF-8 text, more than CONTEXT_MAX_FILES entries or more
 * than CONTEXT_MAX_BYTES of content is a RangeError. `dir` itself may be a symlink. */
export async function composeContext(dir: string): Promise<Record<string, string>> {
  const fs = await import('node:fs/promises');
  const pathMod = await import('node:path');
  const top = await fs.realpath(dir);
  if (!(await fs.stat(top)).isDirectory()) throw new TypeError(`compose context ${JSON.stringify(dir)} is not a directory`);
  const out: Record<string, string> = {};
  const dec = new TextDecoder('utf-8', { fatal: true });
  let n = 0;
  let total = 0;
  const fail = (what: string) => new RangeError(`compose context ${JSON.stringify(dir)}: ${what}`);
  const add = (key: string, value: string) => {
    if (n >= CONTEXT_MAX_FILES) throw fail(`more than ${CONTEXT_MAX_FILES} files (the most a context holds)`);
    out[key] = value;
    n++;
  };
  const tooBig = () => fail(`its files are more than ${CONTEXT_MAX_BYTES >> 20} MiB (the most a context holds)`);
  async function walk(path: string, rel: string): Promise<void> {
    const names = (await fs.readdir(path)).sort();
    for (const name of names) {
      if (name.startsWith('.')) continue;
      const full = pathMod.join(path, name);
      const key = rel + name;
      const st = await fs.lstat(full);
      if (st.isDirectory()) {
        const before = n;
        await walk(full, key + '/');
        if (n === before) add(key + '/', '');
      } else if (st.isFile()) {
        if (total + st.size > CONTEXT_MAX_BYTES) throw tooBig();
        const data = await fs.readFile(full);
        if (total + data.length > CONTEXT_MAX_BYTES) throw tooBig();
        let text: string;
        try { text = dec.decode(data); } catch { throw fail(`${key} is not UTF-8 text (a context holds text files only)`); }
        total += data.length;
        add(key, text);
      }
      // symlinks, sockets, fifos, devices: a context holds none
    }
  }
  await walk(top, '');
  return out;
}

/** @internal The create's `compose`: the file's text, or {file, env, context} checked. */
export function composeBody(compose: string | ComposeSpec): string | Record<string, unknown> {
  if (typeof compose === 'string') return compose;
  if (!compose || typeof compose !== 'object') throw new TypeError("compose must be the Compose file's text or {file, env?, context?}");
  const unknown = Object.keys(compose).filter((k) => !['file', 'env', 'context', 'pull'].includes(k));
  if (unknown.length) throw new TypeError(`compose: unknown key(s) ${unknown.sort().join(', ')}`);
  if (typeof compose.file !== 'string') throw new TypeError("compose.file must be the Compose file's text (a string)");
  const body: Record<string, unknown> = { file: compose.file };
  for (const k of ['env', 'context'] as const) {
    const v = compose[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'object' || Array.isArray(v) || !Object.values(v).every((x) => typeof x === 'string'))
      throw new TypeError(`compose.${k} must map strings to strings`);
    body[k] = { ...v };
  }
  if (compose.pull !== undefined && compose.pull !== null) {
    if (typeof compose.pull !== 'object' || Array.isArray(compose.pull))
      throw new TypeError('compose.pull must be {insecure?, username?, password?}');
    body.pull = { ...compose.pull };
  }
  return body;
}
