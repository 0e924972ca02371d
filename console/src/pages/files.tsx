// SPDX-License-Identifier: Apache-2.0
// A sandbox's files: a directory's entries, going down and up; upload (one or more files into
// the directory), download, and editing a small text file in place.
import { useEffect, useRef, useState } from 'preact/hooks';
import { type FileInfo, NotFoundError, type Sandbox } from '@warren/sdk';
import { bytes, time } from '../format';
import { ConfirmButton, ErrorNote } from '../ui';

/** Files at most this large open in the editor (larger ones are downloaded). */
const EDIT_MAX = 1 << 20;
const START = '/home/user';

function join(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

function parent(p: string): string {
  const i = p.replace(/\/+$/, '').lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}

function Editor({ sb, file, onClose }: { sb: Sandbox; file: FileInfo; onClose: () => void }) {
  const [text, setText] = useState<string | undefined>();
  const [error, setError] = useState<unknown>();
  const [saved, setSaved] = useState('');
  const area = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    sb.files.read(file.path).then((t) => { setText(t); setTimeout(() => area.current?.focus(), 0); }, setError);
  }, [file.path]);

  async function save(e: Event) {
    e.preventDefault();
    setError(undefined);
    setSaved('');
    try {
      const i = await sb.files.write(file.path, text ?? '', { mode: file.mode || undefined });
      setSaved(`Saved ${bytes(i.size)} at ${new Date().toLocaleTimeString()}.`);
    } catch (err) { setError(err); }
  }

  return (
    <form class="card editor" onSubmit={save} aria-labelledby="editor-title">
      <h3 id="editor-title">Editing <code>{file.path}</code></h3>
      {text === undefined && !error && <p aria-live="polite">Reading…</p>}
      {text !== undefined && (
        <label>Content
          <textarea ref={area} name="content" rows={18} spellcheck={false} value={text}
            onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
        </label>
      )}
      <div class="action-row">
        <button type="submit" class="primary" disabled={text === undefined}>Save</button>
        <button type="button" onClick={onClose}>Close</button>
        <span aria-live="polite" class="status">{saved}</span>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}

export function FilesView({ sb }: { sb: Sandbox }) {
  const [dir, setDir] = useState(START);
  const [draft, setDraft] = useState(START);
  const [entries, setEntries] = useState<FileInfo[] | undefined>();
  const [error, setError] = useState<unknown>();
  const [status, setStatus] = useState('');
  const [editing, setEditing] = useState<FileInfo | undefined>();
  const [tick, setTick] = useState(0);
  const upload = useRef<HTMLInputElement>(null);

  useEffect(() => {
    let live = true;
    setEntries(undefined);
    sb.files.list(dir).then((l) => {
      if (!live) return;
      l.sort((a, b) => Number(b.isDir) - Number(a.isDir) || a.name.localeCompare(b.name));
      setEntries(l);
      setError(undefined);
    }, (e) => {
      if (!live) return;
      if (e instanceof NotFoundError && dir === START) { go('/'); return; }
      setError(e);
      setEntries([]);
    });
    return () => { live = false; };
  }, [sb.id, dir, tick]);

  function go(p: string) {
    setDir(p);
    setDraft(p);
    setEditing(undefined);
  }

  async function download(f: FileInfo) {
    setError(undefined);
    try {
      const blob = await sb.files.read(f.path, { format: 'blob' });
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = f.name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setStatus(`Downloaded ${f.name} (${bytes(blob.size)}).`);
    } catch (e) { setError(e); }
  }

  async function uploadFiles(files: FileList | null) {
    if (!files || !files.length) return;
    setError(undefined);
    try {
      for (const f of Array.from(files)) {
        setStatus(`Uploading ${f.name}…`);
        await sb.files.write(join(dir, f.name), f);
      }
      setStatus(`Uploaded ${files.length === 1 ? files[0]!.name : `${files.length} files`} to ${dir}.`);
      setTick((t) => t + 1);
    } catch (e) { setError(e); setStatus(''); } finally {
      if (upload.current) upload.current.value = '';
    }
  }

  async function remove(f: FileInfo) {
    setError(undefined);
    try {
      await sb.files.remove(f.path, { recursive: f.isDir });
      setStatus(`Deleted ${f.name}.`);
      setTick((t) => t + 1);
    } catch (e) { setError(e); }
  }

  return (
    <section aria-labelledby="files-title">
      <h2 id="files-title" class="sr-only">Files</h2>
      <form class="inline path-bar" onSubmit={(e) => { e.preventDefault(); go(draft.trim() || '/'); }}>
        <button type="button" onClick={() => go(parent(dir))} disabled={dir === '/'} aria-label="Up to the parent directory">↑ Up</button>
        <label class="grow">Directory
          <input name="directory" value={draft} onInput={(e) => setDraft((e.target as HTMLInputElement).value)} spellcheck={false} />
        </label>
        <button type="submit">Open</button>
        <label class="upload">Upload files
          <input ref={upload} type="file" multiple name="upload" onChange={(e) => void uploadFiles((e.target as HTMLInputElement).files)} />
        </label>
      </form>
      <p aria-live="polite" class="status">{status}</p>
      <ErrorNote error={error} onDismiss={() => setError(undefined)} />
      {editing && <Editor sb={sb} file={editing} onClose={() => { setEditing(undefined); setTick((t) => t + 1); }} />}
      {entries === undefined ? <p aria-live="polite">Loading…</p> : entries.length === 0 ? <p class="empty">Empty directory.</p> : (
        <table class="list files" aria-label={`Entries of ${dir}`}>
          <thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Mode</th><th scope="col">Modified</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {entries.map((f) => (
              <tr key={f.path} data-file={f.name}>
                <th scope="row" data-label="Name">
                  {f.isDir
                    ? <button type="button" class="link" onClick={() => go(f.path)}>{f.name}/</button>
                    : <span>{f.name}{f.isSymlink && f.link ? <span class="muted"> → {f.link}</span> : null}</span>}
                </th>
                <td data-label="Size">{f.isDir ? '—' : bytes(f.size)}</td>
                <td data-label="Mode"><code>{f.permissions}</code></td>
                <td data-label="Modified">{time(f.mtime)}</td>
                <td data-label="Actions" class="row-actions">
                  {f.isFile && <button type="button" onClick={() => void download(f)}>Download</button>}
                  {f.isFile && f.size <= EDIT_MAX && <button type="button" onClick={() => setEditing(f)}>Edit</button>}
                  <ConfirmButton label="Delete" question={`Delete ${f.name}${f.isDir ? ' and everything in it' : ''}?`} onConfirm={() => remove(f)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
