/**
 * The shape of src/'s import graph, with TypeScript's own module resolution as the oracle: every
 * source file is scanned by `ts.preProcessFile` (static, type-only, re-export and dynamic imports
 * alike) and each specifier resolved by `ts.resolveModuleName` under the project's tsconfig, so a
 * path the compiler would follow is a path the test follows. The rules: no import cycle in src/ (a
 * cycle is reported by its files, in order); nothing imports src/cli.ts, the entry point; the
 * filter contract (filter/), the filters (extauth/, ratelimit/, firewall/, mesh/), the observer
 * contract (observe/), the observers (tracing/, accesslog/), the listener (listener/) and the
 * protocol folders (grpc/, http1/) reach nothing in proxy/ or roles/, directly or through other
 * files: they sit below the proxy, filters meet it through src/filter/ only and observers through
 * src/observe/ only; outside
 * src/proxy/, nothing imports the pipeline's stages or its exchange (proxy/dataplane.ts is the door);
 * and only src/cli.ts and src/cluster/ import src/roles/, the roles' assembly.
 * Type-only imports count: a cycle of types is still two modules that cannot be read apart.
 */
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SRC = path.join(ROOT, 'src');
const ENTRY = path.join(SRC, 'cli.ts');
/**
 * Folders below the proxy (the filter contract, the filters, the observer contract, the observers, the
 * listener, the protocols): none may reach into these.
 */
const LOWER = ['filter', 'extauth', 'ratelimit', 'firewall', 'grpc', 'http1', 'mesh', 'observe', 'tracing', 'accesslog', 'listener'];
const UPPER = ['proxy', 'roles'];
/** The request pipeline's stages and the exchange they share (src/proxy/dataplane.ts's internals). */
const STAGES = ['proxy/entry/', 'proxy/dispatch.ts', 'proxy/activator.ts', 'proxy/attempts.ts', 'proxy/observation.ts', 'proxy/exchange.ts'];
/** Who may import src/roles/: the command line and the cluster's workers, which start roles. */
const ROLE_STARTERS = ['cli.ts', 'cluster/'];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) return sources(full);
      return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [full] : [];
    })
    .sort();
}

function compilerOptions(): ts.CompilerOptions {
  const configPath = path.join(ROOT, 'tsconfig.json');
  const read = ts.readConfigFile(configPath, ts.sys.readFile);
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
  return ts.parseJsonConfigFileContent(read.config, ts.sys, ROOT).options;
}

interface Graph {
  /** File → the src/ files it imports, each with the specifier as written. */
  readonly edges: Map<string, { to: string; specifier: string }[]>;
  /** Relative specifiers the compiler cannot resolve (a scan the oracle disagrees with). */
  readonly unresolved: string[];
}

function importGraph(): Graph {
  const options = compilerOptions();
  const edges = new Map<string, { to: string; specifier: string }[]>();
  const unresolved: string[] = [];
  for (const file of sources(SRC)) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const out: { to: string; specifier: string }[] = [];
    for (const ref of info.importedFiles) {
      const resolved = ts.resolveModuleName(ref.fileName, file, options, ts.sys, undefined, undefined, ts.ModuleKind.ESNext).resolvedModule;
      if (resolved === undefined) {
        if (ref.fileName.startsWith('.')) unresolved.push(`${rel(file)}: ${ref.fileName}`);
        continue;
      }
      const to = path.resolve(resolved.resolvedFileName);
      if (resolved.isExternalLibraryImport || !to.startsWith(SRC + path.sep)) continue;
      out.push({ to, specifier: ref.fileName });
    }
    edges.set(file, out);
  }
  return { edges, unresolved };
}

function rel(file: string): string {
  return path.relative(ROOT, file).split(path.sep).join('/');
}

/**
 * The strongly connected components with more than one file, or one file importing itself
 * (Tarjan's algorithm): each as one concrete cycle through its first file and every file caught in it.
 */
function cycles(edges: Map<string, { to: string }[]>): { cycle: string[]; files: string[] }[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const { to: w } of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      const selfLoop = (edges.get(v) ?? []).some((e) => e.to === v);
      if (component.length > 1 || selfLoop) components.push(component);
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return components.map((component) => ({ cycle: cycleWithin(new Set(component), edges), files: component.sort() }));
}

/** A shortest cycle through the component's first file (in name order), by breadth-first search. */
function cycleWithin(component: Set<string>, edges: Map<string, { to: string }[]>): string[] {
  const start = [...component].sort()[0]!;
  const parent = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const { to: w } of edges.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [v];
        for (let p = v; p !== start; ) path.push((p = parent.get(p)!));
        return [...path.reverse(), start];
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

function folderOf(file: string): string | undefined {
  const parts = path.relative(SRC, file).split(path.sep);
  return parts.length > 1 ? parts[0] : undefined;
}

const graph = importGraph();

t.test('the scan sees the graph the compiler sees', async (t) => {
  t.same(graph.unresolved, [], 'every relative import resolves');
  // A scan that found nothing would pass every rule below: hold it to a few imports known to exist.
  const proxyFiles = [...graph.edges.keys()].filter((f) => folderOf(f) === 'proxy');
  t.ok(proxyFiles.length > 5, 'src/proxy/ is scanned');
  const total = [...graph.edges.values()].reduce((n, list) => n + list.length, 0);
  t.ok(total > 200, `imports between src/ files found (${total})`);
  t.ok(graph.edges.get(ENTRY)?.some((e) => folderOf(e.to) === 'roles'), 'src/cli.ts imports src/roles/');
});

t.test('no import cycle in src/', async (t) => {
  const found = cycles(graph.edges).map(({ cycle, files }) =>
    files.length > 2 ? `${cycle.map(rel).join(' → ')} (one of the cycles among ${files.map(rel).join(', ')})` : cycle.map(rel).join(' → '),
  );
  t.same(found, [], found.length === 0 ? 'no cycles' : `cycles:\n${found.join('\n')}`);
});

t.test('nothing imports src/cli.ts', async (t) => {
  const importers = [...graph.edges].filter(([, list]) => list.some((e) => e.to === ENTRY)).map(([file]) => rel(file));
  t.same(importers, [], 'src/cli.ts is the entry point, imported by no module');
});

/**
 * The files of UPPER folders that `folder`'s files reach through any chain of imports, each by a
 * shortest chain (breadth-first from all the folder's files at once): an import through a file
 * outside both (src/flags.ts, say) still ties the folder to the proxy.
 */
function reachesUpper(folder: string): string[][] {
  const parent = new Map<string, string | undefined>();
  const queue: string[] = [];
  for (const file of graph.edges.keys()) {
    if (folderOf(file) !== folder) continue;
    parent.set(file, undefined);
    queue.push(file);
  }
  const chains: string[][] = [];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const { to: w } of graph.edges.get(v) ?? []) {
      if (parent.has(w)) continue;
      parent.set(w, v);
      const target = folderOf(w);
      if (target !== undefined && UPPER.includes(target)) {
        const chain = [w];
        for (let p = parent.get(w); p !== undefined; p = parent.get(p)) chain.push(p);
        chains.push(chain.reverse());
        continue;
      }
      queue.push(w);
    }
  }
  return chains;
}

t.test('the filter and observer contracts, the filters, observers, listener and protocol folders reach nothing in proxy/ or roles/', async (t) => {
  for (const folder of LOWER) {
    if (!existsSync(path.join(SRC, folder))) {
      t.comment(`src/${folder}/ does not exist yet`);
      continue;
    }
    const offending = reachesUpper(folder).map((chain) => chain.map(rel).join(' → '));
    t.same(offending, [], `src/${folder}/ reaches nothing in ${UPPER.map((u) => `src/${u}/`).join(' or ')}, directly or through other files`);
  }
});

/** `src/`-relative path with forward slashes. */
function inSrc(file: string): string {
  return path.relative(SRC, file).split(path.sep).join('/');
}

t.test("outside src/proxy/, nothing imports the pipeline's stages or its exchange", async (t) => {
  for (const stage of STAGES) t.ok(existsSync(path.join(SRC, stage)), `src/${stage} exists`);
  const offending: string[] = [];
  for (const [file, list] of graph.edges) {
    if (folderOf(file) === 'proxy') continue;
    for (const e of list) {
      if (STAGES.some((stage) => inSrc(e.to).startsWith(stage))) offending.push(`${rel(file)} imports ${rel(e.to)} ('${e.specifier}')`);
    }
  }
  t.same(offending, [], 'the stages are src/proxy/dataplane.ts\'s internals');
});

t.test('only src/cli.ts and src/cluster/ import src/roles/', async (t) => {
  const offending: string[] = [];
  for (const [file, list] of graph.edges) {
    const from = inSrc(file);
    if (folderOf(file) === 'roles' || ROLE_STARTERS.some((s) => from.startsWith(s))) continue;
    for (const e of list) if (folderOf(e.to) === 'roles') offending.push(`${rel(file)} imports ${rel(e.to)} ('${e.specifier}')`);
  }
  t.same(offending, [], 'src/roles/ is started from the command line and by cluster workers only');
});
