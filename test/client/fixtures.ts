/**
 * Generated answers of the platform API for the client's tests: records of every kind with a table
 * (names, descriptions short and long, ASCII and not, tags of every JSON type, timestamps, links,
 * each kind's own members), lists of them, error bodies, and odd shapes (no `links`, integer-like and
 * `__proto__` keys, nested arrays). From a seeded generator (test/helpers/seed.ts), so a failure is
 * replayed with its seed. Also the platform CLI's own formatter, loaded from the devDependency, which
 * the tests compare the client's output with.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export interface CplnFormat {
  format(obj: unknown, options: { output?: string; color?: boolean; ts?: string; _hints?: Record<string, unknown> }): string;
}

/** The platform CLI's format/format.js (what `cpln ... -o FORMAT` prints, before console.log's newline). */
export const cplnFormat = require('@controlplane/cli/dist/src/format/format.js') as CplnFormat;
export const cplnModels = require('@controlplane/cli/dist/src/format/models.js') as { humanizeDuration(ms: number): string };
export const lodashTruncate = (require('lodash') as { truncate(s: string, o: { length: number; omission: string }): string }).truncate;

export type Rand = () => number;

export function pick<T>(rand: Rand, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]!;
}

function int(rand: Rand, max: number): number {
  return Math.floor(rand() * max);
}

const WORDS = ['shop', 'api', 'web', 'payments', 'a', 'x-1', 'really-long-name-of-something-0123456789', 'β-test', 'данные', '名前', 'naïve', 'e\u0301t\u00e9'];
// Well-formed text only: a zero-width joiner between characters that do not join is measured one way
// by string-width over a line and another over its graphemes, and the platform CLI's table then breaks
// the line in two where the client's does not (src/client/format/table.ts says so).
const UNICODE = ['😀', '👍🏽', '🇫🇷', '👨‍👩‍👧', '名', 'ä', 'a\u0301', '①', 'ｗ', '\ufe0f', '✓', 'e\u0301\u0301'];
const TAG_KEYS = ['env', 'team', 'svc/timeoutSecondsOverride', 'cpln/deployTimestamp', 'svc/deployTimestamp', 'a.b/c', '10', '2', 'zeta', 'Z'];

export function text(rand: Rand, maxWords = 12): string {
  const n = 1 + int(rand, maxWords);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(rand() < 0.2 ? pick(rand, UNICODE) : pick(rand, WORDS));
  return parts.join(rand() < 0.7 ? ' ' : '');
}

function tagValue(rand: Rand): unknown {
  switch (int(rand, 7)) {
    case 0: return text(rand, 3);
    case 1: return int(rand, 1000);
    case 2: return rand() < 0.5;
    case 3: return null;
    case 4: return { nested: text(rand, 2), n: [1, 2] };
    case 5: return text(rand, 30);
    default: return String(int(rand, 100));
  }
}

function tags(rand: Rand): Record<string, unknown> | undefined {
  if (rand() < 0.2) return undefined;
  const out: Record<string, unknown> = {};
  const n = int(rand, 5);
  for (let i = 0; i < n; i++) out[pick(rand, TAG_KEYS)] = tagValue(rand);
  return out;
}

function iso(rand: Rand): string {
  return new Date(Date.UTC(2020 + int(rand, 7), int(rand, 12), 1 + int(rand, 28), int(rand, 24), int(rand, 60), int(rand, 60), int(rand, 1000))).toISOString();
}

const name = (rand: Rand): string => pick(rand, ['shop', 'api', 'web', 'g1', 'demo', 'payments-eu', 'x'.repeat(1 + int(rand, 64))]);

/** Members every record has, with the platform's read-only ones. */
function common(rand: Rand, kind: string, org: string, gvc?: string): Record<string, unknown> {
  const n = name(rand);
  const self = gvc ? `/org/${org}/gvc/${gvc}/${kind}/${n}` : kind === 'org' ? `/org/${org}` : `/org/${org}/${kind}/${n}`;
  const links = [{ rel: 'self', href: self }, { rel: 'org', href: `/org/${org}` }, ...(gvc ? [{ rel: 'gvc', href: `/org/${org}/gvc/${gvc}` }] : [])];
  const r: Record<string, unknown> = { kind, name: kind === 'org' ? org : n, id: `${int(rand, 1e8)}-id`, version: 1 + int(rand, 9) };
  if (rand() < 0.7) r.description = text(rand, rand() < 0.3 ? 20 : 4);
  const t = tags(rand);
  if (t) r.tags = t;
  r.created = rand() < 0.95 ? iso(rand) : 'not a date';
  r.lastModified = iso(rand);
  if (rand() < 0.95) r.links = links;
  if (rand() < 0.3) r.origin = pick(rand, ['default', 'builtin']);
  return r;
}

const LOCATIONS = ['aws-us-east-2', 'gcp-us-east1', 'azure-eastus2', 'loc1'];

/** One record of `kind`, shaped as the platform answers it. */
export function record(rand: Rand, kind: string, org = 'acme'): Record<string, unknown> {
  const gvc = ['workload', 'identity', 'volumeset', 'dbcluster'].includes(kind) ? pick(rand, ['shop', 'g1']) : undefined;
  const r = common(rand, kind, org, gvc);
  switch (kind) {
    case 'gvc':
      r.alias = 'abcdefghij123';
      r.spec = {
        staticPlacement: { locationLinks: LOCATIONS.slice(0, int(rand, 4)).map((l) => `/org/${org}/location/${l}`), ...(rand() < 0.2 ? { locationQuery: { kind: 'location' } } : {}) },
        ...(rand() < 0.3 ? { domain: 'example.com' } : {}),
      };
      break;
    case 'workload':
      r.spec = { type: 'standard', containers: [{ name: 'app', image: 'nginx', ports: [{ number: 8080, protocol: 'http' }] }], defaultOptions: { autoscaling: { minScale: 1 } } };
      r.status = { readyLatest: rand() < 0.5, endpoint: `https://${String(r.name)}-abc.app.localhost`, ...(rand() < 0.5 ? { readyCheckTimestamp: iso(rand) } : {}) };
      break;
    case 'identity':
      if (rand() < 0.5) r.aws = { cloudAccountLink: '//cloudaccount/aws' };
      if (rand() < 0.5) r.gcp = { cloudAccountLink: '//cloudaccount/gcp' };
      if (rand() < 0.3) r.azure = {};
      if (rand() < 0.5) r.status = { objectName: `${String(r.name)}-abc` };
      break;
    case 'secret':
      r.type = pick(rand, ['opaque', 'userpass', 'dictionary', 'tls']);
      break;
    case 'domain':
      r.spec = { dnsMode: 'cname', ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: '//gvc/shop/workload/web' }] }] };
      break;
    case 'location':
      r.provider = pick(rand, ['aws', 'gcp', 'azure']);
      r.region = pick(rand, ['us-east-2', 'us-east1']);
      r.spec = { enabled: rand() < 0.8 };
      break;
    case 'policy':
      r.targetKind = pick(rand, ['workload', 'secret', 'gvc']);
      if (rand() < 0.3) r.target = 'all';
      else if (rand() < 0.5) r.targetLinks = ['//secret/a'];
      if (rand() < 0.4) r.targetQuery = { spec: { match: 'all', terms: [] } };
      r.bindings = [{ permissions: ['view'], principalLinks: ['//group/viewers'] }];
      break;
    case 'quota':
      r.current = int(rand, 50);
      r.max = 10 + int(rand, 100);
      r.unit = 'count';
      r.dimensions = rand() < 0.5 ? {} : { gvcLink: `/org/${org}/gvc/shop` };
      break;
    case 'deployment':
      r.name = `${name(rand)}/${pick(rand, LOCATIONS)}`;
      r.status = { ready: rand() < 0.5, message: text(rand, 3), versions: [{ name: 'v1' }] };
      break;
    case 'auditctx':
      break;
    case 'serviceaccount':
      r.keys = [{ name: 'k1', created: iso(rand) }, { name: 'k2' }];
      break;
    case 'group':
      if (rand() < 0.5) r.memberLinks = ['/org/acme/user/a'];
      if (rand() < 0.5) r.memberQuery = { kind: 'user' };
      break;
    case 'cloudaccount':
      r.provider = pick(rand, ['aws', 'gcp', 'azure']);
      r.data = { roleArn: 'arn:aws:iam::1:role/x', projectId: 'proj-1' };
      break;
    case 'user':
      r.email = 'someone@example.com';
      r.idp = 'google';
      break;
    case 'event':
      r.status = 'done';
      r.context = { a: 1, b: text(rand, 2) };
      break;
    case 'ipset':
      r.spec = { link: '//gvc/shop/workload/web', locations: [{ name: '//location/aws-us-east-2', retentionPolicy: 'keep' }] };
      break;
    case 'volumeset':
      r.spec = { performanceClass: 'general-purpose-ssd', fileSystemType: 'ext4' };
      break;
    case 'dbcluster':
      r.alias = 'abc';
      r.spec = { postgres: { defaults: { size: 10 }, locations: [{ name: 'aws-us-east-2', writable: true }, { name: 'gcp-us-east1' }] } };
      break;
    case 'memcachecluster':
      r.spec = { nodeCount: 3, nodeSizeGiB: 1, locations: ['/org/acme/location/aws-us-east-2'] };
      break;
    case 'mk8s':
      r.alias = 'k8s1';
      r.spec = { version: '1.28', provider: { generic: {} }, addOns: { logs: {}, dashboard: {} } };
      r.status = { homeLocation: 'aws-us-east-2' };
      break;
    case 'spicedbcluster':
      r.spec = { version: '1.0', locations: ['/org/acme/location/aws-us-east-2'] };
      r.status = { externalEndpoint: 'spicedb.example.com:443' };
      break;
    case 'task':
      r.type = 'invite';
      r.targetEmail = 'x@example.com';
      r.status = 'pending';
      break;
    case 'image':
      r.digest = `sha256:${'ab'.repeat(32)}`;
      r.repository = 'nginx';
      r.tag = 'latest';
      break;
    case 'account':
      r.fullName = text(rand, 2);
      r.accountName = 'acct';
      break;
    default:
      break;
  }
  return r;
}

/** The platform's list response of `kind`. */
export function listOf(rand: Rand, kind: string, count: number): Record<string, unknown> {
  const items = Array.from({ length: count }, () => record(rand, kind));
  const links = [{ rel: 'self', href: `/org/acme/${kind}` }, ...(rand() < 0.3 ? [{ rel: 'next', href: `/org/acme/${kind}?cursor=abc` }] : [])];
  return { kind: 'list', itemKind: kind, items, links };
}

/** The platform's error body. */
export function errorBody(rand: Rand): Record<string, unknown> {
  const status = pick(rand, [400, 403, 404, 409, 429]);
  return { status, message: text(rand, 6), code: pick(rand, ['bad_request', 'not_found', 'already_exists']), details: rand() < 0.5 ? {} : { errors: [text(rand, 4)] }, id: `${int(rand, 1e9)}` };
}

/** Odd shapes: no kind, integer-like and `__proto__` keys, nested arrays, scalars. */
export function oddShape(rand: Rand): unknown {
  switch (int(rand, 6)) {
    case 0: return JSON.parse('{"__proto__": {"x": 1}, "name": "p", "10": "ten", "2": "two", "b": [1, [2, {"a": null}]]}');
    case 1: return [record(rand, 'gvc'), record(rand, 'workload')];
    case 2: return { kind: 'queryresult', query: { kind: 'workload' }, items: [record(rand, 'workload')] };
    case 3: return { name: text(rand, 2), items: [], links: [] };
    case 4: return { kind: 'list', itemKind: 'nothing-known', items: [{ name: 'a' }], links: [] };
    default: return { kind: 'workload', name: 'w', links: [] };
  }
}
