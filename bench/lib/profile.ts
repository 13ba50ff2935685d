/**
 * Reads a V8 `.cpuprofile` (from `node --cpu-prof`) and summarizes where the time went: self time
 * per function (the function on top of the stack when sampled), inclusive time of svcproxy's own
 * functions, and self time by owner (svcproxy, each npm package, Node's internals, GC, native).
 * Locations in dist/*.js are mapped back to src/*.ts through the build's source maps.
 *
 *   node bench/dist/lib/profile.js FILE.cpuprofile [TOP]   prints the summary as Markdown
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface CostLine {
  name: string;
  location: string;
  owner: string;
  ms: number;
  /** Share of busy (non-idle) time. */
  share: number;
}

export interface ProfileSummary {
  file: string;
  wallMs: number;
  busyMs: number;
  self: CostLine[];
  inclusiveOwn: CostLine[];
  owners: { owner: string; ms: number; share: number }[];
  /** For the top self-time functions: which svcproxy function (nearest on the stack) led to them. */
  callers: { name: string; location: string; ms: number; via: { name: string; location: string; ms: number }[] }[];
}

const maps = new Map<string, SourceMap | null>();

function sourceMapFor(file: string): SourceMap | null {
  if (maps.has(file)) return maps.get(file)!;
  let map: SourceMap | null = null;
  try {
    const mapFile = `${file}.map`;
    if (existsSync(mapFile)) map = new SourceMap(JSON.parse(readFileSync(mapFile, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]);
  } catch {
    map = null;
  }
  maps.set(file, map);
  return map;
}

/** `src/proxy/forward.ts:123` for a frame in svcproxy's dist/, else a short form of the url. */
function locate(frame: CallFrame, root: string | undefined): { location: string; owner: string } {
  const { url } = frame;
  if (!url) {
    const name = frame.functionName;
    if (name.startsWith('(')) return { location: '', owner: name };
    // Node's C++ stream bindings: the time of the write/read system calls themselves (on loopback
    // a write also runs the receiving side's TCP path) plus copying JS strings into them.
    if (/^(writev|writeBuffer|writeLatin1String|writeUtf8String|writeAsciiString|writeUcs2String|readStart|readStop|shutdown|close)$/.test(name)) {
      return { location: 'C++ stream binding (system call)', owner: 'native: socket I/O (syscalls)' };
    }
    return { location: 'V8 builtin / C++', owner: 'native: other (V8 builtins, C++)' };
  }
  if (url.startsWith('wasm:')) return { location: url, owner: 'undici: llhttp (wasm)' };
  if (url.startsWith('node:')) return { location: `${url}:${frame.lineNumber + 1}`, owner: `node: ${nodeArea(url)}` };
  let file = url;
  if (url.startsWith('file://')) file = fileURLToPath(url);
  const nm = file.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = file.slice(nm + '/node_modules/'.length).split('/');
    const pkg = rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
    return { location: `${pkg}/${rest.slice(pkg.split('/').length).join('/')}:${frame.lineNumber + 1}`, owner: pkg };
  }
  if (root && file.startsWith(path.join(root, 'dist') + path.sep)) {
    const map = sourceMapFor(file);
    const entry = map?.findEntry(frame.lineNumber, frame.columnNumber) as { originalSource?: string; originalLine?: number } | undefined;
    if (entry?.originalSource) {
      const src = entry.originalSource.startsWith('file://') ? fileURLToPath(entry.originalSource) : path.resolve(path.dirname(file), entry.originalSource);
      return { location: `${path.relative(root, src)}:${(entry.originalLine ?? 0) + 1}`, owner: 'svcproxy' };
    }
    return { location: `${path.relative(root, file)}:${frame.lineNumber + 1}`, owner: 'svcproxy' };
  }
  return { location: `${root ? path.relative(root, file) : file}:${frame.lineNumber + 1}`, owner: 'other' };
}

function nodeArea(url: string): string {
  const m = /^node:(?:internal\/)?([a-z_0-9]+)/.exec(url);
  const area = m?.[1] ?? url;
  if (area.startsWith('http2') || area === 'http2') return 'http2';
  if (area.startsWith('http') || area === '_http_server' || area === '_http_outgoing' || area === '_http_common' || area === '_http_incoming') return 'http';
  if (area === 'streams' || area === 'stream') return 'streams';
  if (area === 'net' || area === 'stream_base_commons') return 'net';
  if (area === 'timers') return 'timers';
  if (area === 'process') return 'process (ticks, queues)';
  return area;
}

/**
 * `window`: only samples taken between these CLOCK_MONOTONIC times in µs (what
 * `process.hrtime.bigint() / 1000n` gives in any process on the machine; V8 stamps samples on the same
 * clock), so start-up and shutdown stay out of a profile taken under load.
 */
export function summarize(file: string, root?: string, top = 25, window?: { fromUs: number; toUs: number }): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of profile.nodes) byId.set(n.id, n);
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keyOf = new Map<number, { key: string; name: string; location: string; owner: string }>();
  for (const n of profile.nodes) {
    const { location, owner } = locate(n.callFrame, root);
    const name = n.callFrame.functionName || '(anonymous)';
    keyOf.set(n.id, { key: `${name}@${location}`, name, location, owner });
  }

  const self = new Map<string, number>();
  /** self-time key → nearest svcproxy frame key (or a label) → µs. */
  const via = new Map<string, Map<string, number>>();
  const inclusive = new Map<string, number>();
  const owners = new Map<string, number>();
  let idle = 0;
  let total = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    // timeDeltas[i] is the time from the previous sample to this one; the next delta is the
    // time this sample stood for (as DevTools reads it).
    const us = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    total += us;
    const id = profile.samples[i]!;
    const k = keyOf.get(id)!;
    if (k.name === '(idle)') {
      idle += us;
      continue;
    }
    self.set(k.key, (self.get(k.key) ?? 0) + us);
    owners.set(k.owner, (owners.get(k.owner) ?? 0) + us);
    const seen = new Set<string>();
    let nearest: string | undefined;
    let firstJs: string | undefined;
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const kk = keyOf.get(cur)!;
      if (firstJs === undefined && cur !== id && byId.get(cur)!.callFrame.url && !byId.get(cur)!.callFrame.url.startsWith('node:')) firstJs = kk.key;
      if (kk.owner !== 'svcproxy' || seen.has(kk.key)) continue;
      nearest ??= kk.key;
      seen.add(kk.key);
      inclusive.set(kk.key, (inclusive.get(kk.key) ?? 0) + us);
    }
    const v = via.get(k.key) ?? new Map<string, number>();
    via.set(k.key, v);
    const label = nearest ?? firstJs ?? '(only Node internals or the event loop)@';
    v.set(label, (v.get(label) ?? 0) + us);
  }
  const busy = total - idle;
  const info = new Map<string, { name: string; location: string; owner: string }>();
  for (const k of keyOf.values()) info.set(k.key, k);
  const lines = (m: Map<string, number>): CostLine[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, us]) => ({ ...info.get(key)!, ms: us / 1000, share: busy ? us / busy : 0 }));
  const topSelf = lines(self);
  const callers = topSelf.slice(0, 6).map((l) => {
    const m = via.get(`${l.name}@${l.location}`) ?? new Map<string, number>();
    return {
      name: l.name,
      location: l.location || l.owner,
      ms: l.ms,
      via: [...m.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 4)
        .map(([key, us]) => {
          const i = info.get(key);
          return { name: i?.name ?? key.replace(/@$/, ''), location: i?.location ?? '', ms: us / 1000 };
        }),
    };
  });
  return {
    file,
    wallMs: total / 1000,
    busyMs: busy / 1000,
    self: topSelf,
    callers,
    inclusiveOwn: lines(inclusive).slice(0, 15),
    owners: [...owners.entries()].sort((a, b) => b[1] - a[1]).map(([owner, us]) => ({ owner, ms: us / 1000, share: busy ? us / busy : 0 })),
  };
}

const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
const cell = (s: string): string => s.replace(/\|/g, '\\|');

export function summaryMarkdown(s: ProfileSummary, title: string): string {
  const out: string[] = [];
  out.push(`#### ${title}`, '');
  out.push(`Profile \`${path.basename(s.file)}\`: ${(s.wallMs / 1000).toFixed(1)} s sampled, ${(s.busyMs / 1000).toFixed(1)} s busy (${pct(s.wallMs ? s.busyMs / s.wallMs : 0)}); shares below are of busy time.`, '');
  out.push('Self time by owner:', '');
  out.push('| owner | self | share |', '|---|---:|---:|');
  for (const o of s.owners.slice(0, 12)) out.push(`| ${cell(o.owner)} | ${o.ms.toFixed(0)} ms | ${pct(o.share)} |`);
  out.push('', 'Top functions by self time:', '');
  out.push('| # | function | where | self | share |', '|---:|---|---|---:|---:|');
  s.self.forEach((l, i) => out.push(`| ${i + 1} | \`${cell(l.name)}\` | ${cell(l.location || l.owner)} | ${l.ms.toFixed(0)} ms | ${pct(l.share)} |`));
  out.push('', 'Where the top self-time functions were called from (the nearest svcproxy function on the stack; else the nearest library function):', '');
  out.push('| function | self | reached through |', '|---|---:|---|');
  for (const c of s.callers) {
    const v = c.via.map((x) => `\`${cell(x.name)}\`${x.location ? ` (${cell(x.location)})` : ''} ${x.ms.toFixed(0)} ms`).join('; ');
    out.push(`| \`${cell(c.name)}\` | ${c.ms.toFixed(0)} ms | ${v} |`);
  }
  out.push('', "svcproxy's own functions by inclusive time (self + everything they call):", '');
  out.push('| function | where | inclusive | share |', '|---|---|---:|---:|');
  for (const l of s.inclusiveOwn) out.push(`| \`${cell(l.name)}\` | ${cell(l.location)} | ${l.ms.toFixed(0)} ms | ${pct(l.share)} |`);
  out.push('');
  return out.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [file, topArg] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node bench/dist/lib/profile.js FILE.cpuprofile [TOP]\n');
    process.exit(2);
  }
  const here = path.dirname(fileURLToPath(import.meta.url));
  const root = path.resolve(here, '..', '..', '..');
  process.stdout.write(summaryMarkdown(summarize(file, root, Number(topArg) || 25), path.basename(file)));
}
