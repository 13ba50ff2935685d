/**
 * The Dockerfile read as Docker reads it, far enough to run its image's program here without Docker:
 * the final stage's WORKDIR, COPY, RUN, USER, EXPOSE, ENTRYPOINT and CMD (the exec, JSON, form), and
 * .dockerignore's patterns. `stageImage` lays out the final stage's files under a temporary root
 * (COPY from the build stage takes the repository's built files, node_modules a link to the
 * repository's, which still holds the development dependencies the image prunes), and makes the
 * links its RUN steps make, so that `svcproxy` runs from that root's PATH as it would in the image.
 * A RUN step of another kind is an error: the emulation must be taught it.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from './schema.js';

export interface Copy {
  readonly from: string | undefined;
  readonly sources: readonly string[];
  readonly dest: string;
}

export interface Image {
  readonly baseImages: readonly string[];
  readonly workdir: string;
  readonly copies: readonly Copy[];
  /** COPY sources of every stage that come from the build context. */
  readonly contextSources: readonly string[];
  readonly runs: readonly string[];
  readonly user: string | undefined;
  readonly expose: readonly number[];
  readonly entrypoint: readonly string[];
  readonly cmd: readonly string[];
}

/** Instructions with continuation lines joined and comments dropped, by stage. */
function stages(text: string): { op: string; args: string }[][] {
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const out: { op: string; args: string }[][] = [];
  for (const line of lines) {
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`Dockerfile: cannot read ${JSON.stringify(line)}`);
    const op = m[1]!.toUpperCase();
    if (op === 'FROM') out.push([]);
    if (out.length === 0) throw new Error('Dockerfile: an instruction before FROM');
    out[out.length - 1]!.push({ op, args: m[2]! });
  }
  return out;
}

function execForm(op: string, args: string): string[] {
  const parsed = JSON.parse(args) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) throw new Error(`${op} must be the exec (JSON) form, not ${args}`);
  return parsed as string[];
}

function copyOf(args: string): Copy {
  const words = args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift()!;
    if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
    else throw new Error(`COPY ${flag} is not understood here`);
  }
  if (words.length < 2) throw new Error(`COPY ${args}: a source and a destination`);
  return { from, sources: words.slice(0, -1), dest: words[words.length - 1]! };
}

export function parseDockerfile(text: string): Image {
  const all = stages(text);
  const last = all[all.length - 1]!;
  const one = (op: string): string | undefined => last.filter((i) => i.op === op).map((i) => i.args).pop();
  const contextSources = all.flatMap((s) => s.filter((i) => i.op === 'COPY').map((i) => copyOf(i.args)).filter((c) => c.from === undefined).flatMap((c) => c.sources));
  return {
    baseImages: all.map((s) => s[0]!.args.split(/\s+/)[0]!),
    workdir: one('WORKDIR') ?? '/',
    copies: last.filter((i) => i.op === 'COPY').map((i) => copyOf(i.args)),
    contextSources,
    runs: last.filter((i) => i.op === 'RUN').map((i) => i.args),
    user: one('USER'),
    expose: last.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map((p) => Number(p.replace(/\/tcp$/, ''))),
    entrypoint: execForm('ENTRYPOINT', one('ENTRYPOINT') ?? '[]'),
    cmd: execForm('CMD', one('CMD') ?? '[]'),
  };
}

export function readImage(): Image {
  return parseDockerfile(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
}

/** Whether .dockerignore keeps `source` (a context path) out of the build context. */
export function ignoredBy(dockerignore: string, source: string): boolean {
  const patterns = dockerignore.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const clean = source.replace(/^\.\//, '').replace(/\/$/, '');
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = (negate ? raw.slice(1) : raw).replace(/^\//, '').replace(/\/$/, '');
    const re = new RegExp(`^${pattern.split('**').map((part) => part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')).join('.*')}(/.*)?$`);
    if (re.test(clean)) ignored = !negate;
  }
  return ignored;
}

export interface StagedImage {
  /** The image's root folder. */
  readonly root: string;
  /** PATH for a process of the image: its /usr/local/bin first, then node's own folder. */
  readonly path: string;
  /** WORKDIR under the root. */
  readonly cwd: string;
}

/** The final stage's files under a temporary root, removed at teardown. */
export function stageImage(t: { teardown(fn: () => unknown): void }, image: Image): StagedImage {
  const root = mkdtempSync(path.join(tmpdir(), 'svcproxy-image-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const inRoot = (p: string): string => path.join(root, p);
  const cwd = inRoot(image.workdir);
  mkdirSync(cwd, { recursive: true });
  for (const copy of image.copies) {
    for (const source of copy.sources) {
      // The build stage ran the README's install in a copy of the repository under WORKDIR: its
      // files are the repository's own, built (`npm run build`).
      const rel = copy.from === undefined ? source : path.relative(image.workdir, source);
      if (rel.startsWith('..')) throw new Error(`COPY --from=${copy.from} ${source}: outside ${image.workdir}`);
      const from = path.join(ROOT, rel);
      if (!existsSync(from)) throw new Error(`COPY ${source}: ${from} does not exist (is dist/ built? npm run build)`);
      const dest = path.resolve(cwd, copy.dest.endsWith('/') || copy.sources.length > 1 || copy.dest === '.' || copy.dest === './' ? path.join(copy.dest, path.basename(rel)) : copy.dest);
      const target = path.join(root, path.relative(root, dest));
      mkdirSync(path.dirname(target), { recursive: true });
      if (path.basename(rel) === 'node_modules') symlinkSync(from, target, 'dir');
      else cpSync(from, target, { recursive: true });
    }
  }
  for (const run of image.runs) {
    const link = /^ln -s (\S+) (\S+)$/.exec(run.trim());
    if (!link) throw new Error(`RUN ${run}: not emulated here`);
    mkdirSync(path.dirname(inRoot(link[2]!)), { recursive: true });
    symlinkSync(inRoot(link[1]!), inRoot(link[2]!));
  }
  return { root, cwd, path: [inRoot('/usr/local/bin'), path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter) };
}
