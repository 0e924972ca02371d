// Renders each overlay of deploy/kubernetes with `kubectl kustomize` and checks what comes out,
// offline (no cluster): every object against the Kubernetes API's schema (kubernetes-models'
// validate(), plus a walk of its type declarations that refuses fields the API does not have,
// which validate() lets through), and Warren's own rules: the node DaemonSet is privileged and on
// the host's network, the gateway is not privileged, every container has probes, every Secret,
// ConfigMap, ServiceAccount and Service that is referred to exists with the keys read, and the
// gateway's --discovery names the namespace, labels and port of the node DaemonSet.
//
//   node tests/deploy/validate.mjs [OVERLAY_DIR...]      (make deploy-check; KUBECTL=path)
//
// An overlay's Secrets that are made by hand (production) are declared in its
// secrets.example.yaml, which is validated too. Exits 1 with one line per problem.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseAllDocuments } from 'yaml'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '../..')
const modules = path.join(here, 'node_modules')
const kubectl = process.env.KUBECTL || 'kubectl'
const problems = []
const fail = (where, msg) => problems.push(`${where}: ${msg}`)

// --- The schema: kubernetes-models' classes and their type declarations ---------------------

// "apps/v1" + "DaemonSet" -> kubernetes-models/apps/v1/DaemonSet (core "v1" -> kubernetes-models/v1).
function modelPath(apiVersion, kind) {
  return `kubernetes-models/${apiVersion}/${kind}`
}

async function modelClass(apiVersion, kind) {
  if (!/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion) || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) return null
  if (!existsSync(path.join(modules, modelPath(apiVersion, kind) + '.d.ts'))) return null
  const mod = await import(modelPath(apiVersion, kind))
  return mod[kind] ?? null
}

// One .d.ts of kubernetes-models: its interface's fields (name -> type text) and its imports
// (name -> .d.ts file). Each file declares one interface.
const declCache = new Map()
function decl(file) {
  if (declCache.has(file)) return declCache.get(file)
  const text = readFileSync(file, 'utf8')
  const imports = new Map()
  for (const m of text.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm)) {
    const spec = m[2]
    const target = spec.startsWith('.')
      ? path.resolve(path.dirname(file), spec + '.d.ts')
      : path.join(modules, spec + '.d.ts')
    for (const name of m[1].split(',').map((s) => s.trim())) imports.set(name, target)
  }
  const fields = new Map()
  const body = /^export interface I\w+(?: extends ([\w, ]+))? \{\n([\s\S]*?)^\}/m.exec(text)
  if (body) {
    // A top-level kind's interface extends TypeMeta: apiVersion and kind.
    if (body[1]?.includes('TypeMeta')) ['apiVersion', 'kind'].forEach((f) => fields.set(f, 'string'))
    for (const m of body[2].matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) fields.set(m[1], m[2].replace(/;$/, ''))
  }
  const d = { fields, imports, isInterface: body !== null }
  declCache.set(file, d)
  return d
}

// Fields of obj that file's interface does not declare, recursively through the referenced
// interfaces. Maps, scalars and the few inline object types (a StatefulSet's
// volumeClaimTemplates) are not descended into.
function unknownFields(obj, file, where) {
  const d = decl(file)
  if (!d.isInterface || obj === null || typeof obj !== 'object' || Array.isArray(obj)) return
  for (const [key, value] of Object.entries(obj)) {
    const type = d.fields.get(key)
    if (type === undefined) {
      fail(where, `unknown field "${key}"`)
      continue
    }
    const arr = /^Array<(I\w+)>$/.exec(type)
    const one = /^(I\w+)$/.exec(type)
    if (arr && Array.isArray(value) && d.imports.has(arr[1])) {
      value.forEach((v, i) => unknownFields(v, d.imports.get(arr[1]), `${where}.${key}[${i}]`))
    } else if (one && d.imports.has(one[1])) {
      unknownFields(value, d.imports.get(one[1]), `${where}.${key}`)
    }
  }
}

async function validateObject(obj, where) {
  const Cls = await modelClass(obj.apiVersion ?? '', obj.kind ?? '')
  if (Cls === null) {
    fail(where, `unknown kind ${obj.apiVersion}/${obj.kind}`)
    return
  }
  // kustomize 5 folds a long Secret value's base64 over lines; the API server's decoder skips
  // the newlines, the schema's "byte" format does not.
  if (obj.kind === 'Secret' && obj.data) {
    obj = { ...obj, data: Object.fromEntries(Object.entries(obj.data).map(([k, v]) => [k, String(v).replace(/\s+/g, '')])) }
  }
  try {
    new Cls(obj).validate()
  } catch (e) {
    fail(where, `schema: ${e.message.split('\n').slice(0, 4).join('; ')}`)
  }
  unknownFields(obj, path.join(modules, modelPath(obj.apiVersion, obj.kind) + '.d.ts'), where)
}

// --- Rendering ------------------------------------------------------------------------------

function render(dir) {
  try {
    return execFileSync(kubectl, ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (e) {
    fail(dir, `kubectl kustomize failed: ${(e.stderr || e.message).trim()}`)
    return null
  }
}

function parseDocs(text, where) {
  const out = []
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) {
      fail(where, `YAML: ${doc.errors[0].message}`)
      continue
    }
    const obj = doc.toJS()
    if (obj !== null && obj !== undefined) out.push(obj)
  }
  return out
}

// --- Warren's rules -------------------------------------------------------------------------

const name = (o) => `${o.kind}/${o.metadata?.name}`
const podSpecOf = (o) => (['Deployment', 'DaemonSet', 'StatefulSet'].includes(o.kind) ? o.spec?.template?.spec : null)
const containersOf = (spec) => [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]

// Every Secret/ConfigMap key, ServiceAccount and Service a pod or an Ingress refers to.
function references(objs) {
  const refs = []
  for (const o of objs) {
    const spec = podSpecOf(o)
    if (spec) {
      if (spec.serviceAccountName) refs.push({ kind: 'ServiceAccount', name: spec.serviceAccountName, from: name(o) })
      for (const c of containersOf(spec)) {
        for (const e of c.env ?? []) {
          const s = e.valueFrom?.secretKeyRef
          const m = e.valueFrom?.configMapKeyRef
          if (s && !s.optional) refs.push({ kind: 'Secret', name: s.name, key: s.key, from: `${name(o)} env ${e.name}` })
          if (m && !m.optional) refs.push({ kind: 'ConfigMap', name: m.name, key: m.key, from: `${name(o)} env ${e.name}` })
        }
        for (const e of c.envFrom ?? []) {
          if (e.secretRef && !e.secretRef.optional) refs.push({ kind: 'Secret', name: e.secretRef.name, from: name(o) })
          if (e.configMapRef && !e.configMapRef.optional) refs.push({ kind: 'ConfigMap', name: e.configMapRef.name, from: name(o) })
        }
      }
      for (const v of spec.volumes ?? []) {
        if (v.secret && !v.secret.optional) refs.push({ kind: 'Secret', name: v.secret.secretName, from: `${name(o)} volume ${v.name}` })
        if (v.configMap && !v.configMap.optional) refs.push({ kind: 'ConfigMap', name: v.configMap.name, from: `${name(o)} volume ${v.name}` })
      }
    }
    if (o.kind === 'Ingress') {
      for (const t of o.spec?.tls ?? []) if (t.secretName) refs.push({ kind: 'Secret', name: t.secretName, from: name(o) })
      for (const r of o.spec?.rules ?? []) {
        for (const p of r.http?.paths ?? []) {
          const svc = p.backend?.service
          if (svc) refs.push({ kind: 'Service', name: svc.name, port: svc.port, from: `${name(o)} ${r.host}` })
        }
      }
    }
  }
  return refs
}

function checkReferences(objs, external, where) {
  const all = [...objs, ...external]
  const find = (kind, n) => all.find((o) => o.kind === kind && o.metadata?.name === n)
  for (const r of references(objs)) {
    const target = find(r.kind, r.name)
    if (!target) {
      fail(where, `${r.from} refers to ${r.kind} ${r.name}, which is neither rendered nor declared`)
      continue
    }
    if (r.key !== undefined) {
      const keys = new Set([...Object.keys(target.data ?? {}), ...Object.keys(target.stringData ?? {})])
      if (!keys.has(r.key)) fail(where, `${r.from} reads key ${r.key} of ${r.kind} ${r.name}, which has ${[...keys].join(', ') || 'none'}`)
    }
    if (r.port !== undefined) {
      const ports = target.spec?.ports ?? []
      if (!ports.some((p) => (r.port.name ? p.name === r.port.name : p.port === r.port.number))) {
        fail(where, `${r.from} uses port ${JSON.stringify(r.port)} of Service ${r.name}, which has no such port`)
      }
    }
  }
}

// The value after flag in a container's args.
function argOf(c, flag) {
  const args = c.args ?? []
  const i = args.indexOf(flag)
  return i >= 0 ? args[i + 1] : undefined
}

function checkWarren(objs, where) {
  const ns = objs.find((o) => o.kind === 'Namespace')
  const node = objs.find((o) => o.kind === 'DaemonSet' && o.metadata?.name === 'warren-node')
  const gw = objs.find((o) => o.kind === 'Deployment' && o.metadata?.name === 'warren-gateway')
  if (!ns || !node || !gw) {
    fail(where, 'want the Namespace, DaemonSet/warren-node and Deployment/warren-gateway')
    return
  }
  if (ns.metadata?.labels?.['pod-security.kubernetes.io/enforce'] !== 'privileged') {
    fail(where, `Namespace/${ns.metadata.name} is not labelled pod-security.kubernetes.io/enforce=privileged`)
  }
  for (const o of objs) {
    if (o.kind !== 'Namespace' && o.metadata?.namespace !== ns.metadata.name) {
      fail(where, `${name(o)} is in namespace ${o.metadata?.namespace ?? '(none)'}, not ${ns.metadata.name}`)
    }
  }

  // Every container of every workload has both probes, and an image with a tag.
  for (const o of objs) {
    for (const c of podSpecOf(o)?.containers ?? []) {
      if (!c.readinessProbe || !c.livenessProbe) fail(where, `${name(o)} container ${c.name} lacks a readiness or liveness probe`)
      if (!/:[^/]+$/.test(c.image ?? '') || /:latest$/.test(c.image)) fail(where, `${name(o)} container ${c.name}: image ${c.image} has no fixed tag`)
    }
  }

  // The node: privileged on the host's network, upgraded by hand, on the tainted pool.
  const ns_ = node.spec.template.spec
  if (ns_.hostNetwork !== true) fail(where, 'DaemonSet/warren-node: hostNetwork is not true')
  if (ns_.dnsPolicy !== 'ClusterFirstWithHostNet') fail(where, 'DaemonSet/warren-node: dnsPolicy is not ClusterFirstWithHostNet')
  if (node.spec.updateStrategy?.type !== 'OnDelete') fail(where, 'DaemonSet/warren-node: updateStrategy is not OnDelete')
  for (const c of ns_.containers) {
    if (c.securityContext?.privileged !== true) fail(where, `DaemonSet/warren-node container ${c.name} is not privileged`)
  }
  for (const [k, v] of Object.entries(ns_.nodeSelector ?? {})) {
    if (!(ns_.tolerations ?? []).some((t) => t.key === k && (t.operator === 'Exists' || t.value === v) && t.effect === 'NoSchedule')) {
      fail(where, `DaemonSet/warren-node does not tolerate the taint ${k}=${v}:NoSchedule of its pool`)
    }
  }
  const nodeC = ns_.containers.find((c) => argOf(c, '--role') === 'node')
  if (!nodeC) fail(where, 'DaemonSet/warren-node runs no --role node container')

  // The gateway: no privilege at all.
  const gs = gw.spec.template.spec
  if (gs.hostNetwork || gs.hostPID || gs.hostIPC) fail(where, 'Deployment/warren-gateway uses a host namespace')
  for (const c of containersOf(gs)) {
    const sc = c.securityContext ?? {}
    if (sc.privileged) fail(where, `Deployment/warren-gateway container ${c.name} is privileged`)
    if (sc.allowPrivilegeEscalation !== false) fail(where, `Deployment/warren-gateway container ${c.name} allows privilege escalation`)
    if ((sc.capabilities?.add ?? []).length > 0) fail(where, `Deployment/warren-gateway container ${c.name} adds capabilities`)
    if (sc.runAsNonRoot !== true && gs.securityContext?.runAsNonRoot !== true) fail(where, `Deployment/warren-gateway container ${c.name} may run as root`)
  }
  const gwC = gs.containers.find((c) => argOf(c, '--role') === 'gateway')
  if (!gwC) {
    fail(where, 'Deployment/warren-gateway runs no --role gateway container')
    return
  }

  // --discovery kubernetes:NS/KEY=VALUE@PORT names this DaemonSet's pods and its API's port.
  const disc = /^kubernetes:([^/]+)\/(.+?)(?:@(\d+))?$/.exec(argOf(gwC, '--discovery') ?? '')
  if (!disc) {
    fail(where, `Deployment/warren-gateway: --discovery ${argOf(gwC, '--discovery')} is not kubernetes:NS/SELECTOR@PORT`)
  } else {
    const [, dns, sel, port] = disc
    if (dns !== ns.metadata.name) fail(where, `--discovery lists namespace ${dns}, the DaemonSet is in ${ns.metadata.name}`)
    const labels = node.spec.template.metadata?.labels ?? {}
    for (const term of sel.split(',')) {
      const [k, v] = term.split('=')
      if (labels[k] !== v) fail(where, `--discovery selector term ${term} does not match DaemonSet/warren-node's pod labels`)
    }
    const listen = nodeC && argOf(nodeC, '--listen')
    if (nodeC && listen?.split(':').pop() !== (port ?? '7070')) fail(where, `--discovery port ${port ?? '7070'} is not the node's --listen ${listen}`)
  }
  for (const c of [nodeC, gwC]) {
    const f = c && argOf(c, '--node-token-file')
    if (c && !(c.volumeMounts ?? []).some((m) => f?.startsWith(m.mountPath + '/'))) fail(where, `${c.name}: --node-token-file ${f} is on no volume`)
  }
  const svcs = objs.filter((o) => o.kind === 'Service')
  for (const s of svcs) {
    const sel = s.spec?.selector ?? {}
    const match = objs.some((o) => podSpecOf(o) && Object.entries(sel).every(([k, v]) => o.spec.template.metadata?.labels?.[k] === v))
    if (!match) fail(where, `${name(s)} selects no workload's pods`)
  }
}

// --- Main -----------------------------------------------------------------------------------

const overlayRoot = path.join(root, 'deploy/kubernetes/overlays')
const overlays = process.argv.length > 2
  ? process.argv.slice(2).map((d) => path.resolve(d))
  : readdirSync(overlayRoot).map((d) => path.join(overlayRoot, d)).sort()

for (const dir of overlays) {
  const where = path.relative(root, dir)
  const text = render(dir)
  if (text === null) continue
  const objs = parseDocs(text, where)
  for (const o of objs) await validateObject(o, `${where} ${name(o)}`)
  let external = []
  const examples = path.join(dir, 'secrets.example.yaml')
  if (existsSync(examples)) {
    external = parseDocs(readFileSync(examples, 'utf8'), `${where}/secrets.example.yaml`)
    for (const o of external) {
      if (o.kind !== 'Secret') fail(`${where}/secrets.example.yaml`, `${name(o)} is not a Secret`)
      await validateObject(o, `${where}/secrets.example.yaml ${name(o)}`)
    }
  }
  checkReferences(objs, external, where)
  checkWarren(objs, where)
  const kinds = [...new Set(objs.map((o) => o.kind))].sort().join(', ')
  console.log(`${where}: ${objs.length} objects (${kinds})${external.length ? `, ${external.length} declared Secrets` : ''}`)
}

if (problems.length > 0) {
  for (const p of problems) console.error(`deploy-check: ${p}`)
  console.error(`deploy-check: ${problems.length} problem(s)`)
  process.exit(1)
}
console.log('deploy-check: ok')
