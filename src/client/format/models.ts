/**
 * The text table of each kind of the platform API: the columns and cells of the platform CLI's
 * format/models.js for the kinds its API answers (org, gvc, workload, identity, secret, domain,
 * location, policy, quota, auditctx, deployment, and the platform's others). A kind without a model
 * is printed as JSON (format/index.ts). Where the platform CLI's cell throws on a record that lacks a
 * member (a workload without `status`, a GVC without `spec`), the cell here is empty.
 */
import { at, cut, gvcOf, keyValues, linkOf, member, timestamp, type CellContext, type Item } from './cells.js';

export interface Column {
  readonly name: string;
  /** Left out when every row's cell is empty. */
  readonly hideWhenEmpty?: boolean;
}

export interface Model {
  readonly columns: readonly Column[];
  row(item: unknown, ctx: CellContext): unknown[];
}

const DESCRIPTION_MAX = 40;

const c = (...names: string[]): Column[] => names.map((name) => ({ name }));
const description = (o: unknown): string => cut(o, 'description', DESCRIPTION_MAX);
const tags = (o: unknown): string => keyValues(o, 'tags');
const created = (o: unknown, ctx: CellContext): unknown => timestamp(o, 'created', ctx);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const last = (link: unknown, sep = '/'): string => (typeof link === 'string' ? link.split(sep).pop() ?? '' : '');

function gvcLocations(o: unknown): string {
  const placement = at(o, 'spec.staticPlacement');
  const names = list(member(placement, 'locationLinks')).map((l) => last(l));
  if (member(placement, 'locationQuery')) names.push('+');
  return names.join('\n');
}

function specLocations(o: unknown): string {
  return list(at(o, 'spec.locations')).map((l) => (typeof l === 'string' ? l.split('/location/')[1] ?? '' : '')).join('\n');
}

function matches(o: unknown): string {
  if (member(o, 'target') === 'all') return 'all';
  return [member(o, 'targetQuery') ? 'query' : '', member(o, 'targetLinks') ? 'links' : ''].filter(Boolean).join(',');
}

function providers(o: unknown): string {
  return ['aws', 'gcp', 'azure'].filter((p) => member(o, p)).join(',');
}

function providerInfo(o: unknown): unknown {
  const data = member(o, 'data');
  if (!data) return '';
  const provider = member(o, 'provider');
  if (provider === 'gcp') return member(data, 'projectId');
  if (provider === 'aws') return member(data, 'roleArn');
  return '';
}

const MODELS: Readonly<Record<string, Model>> = {
  org: { columns: c('NAME', 'DESCRIPTION', 'LINK', 'TAGS'), row: (o) => [member(o, 'name'), description(o), linkOf(o, 'self'), tags(o)] },
  account: { columns: c('ID', 'FULL NAME', 'ACCOUNT NAME'), row: (o) => [member(o, 'id'), member(o, 'fullName'), member(o, 'accountName')] },
  domain: { columns: c('NAME', 'DESCRIPTION', 'TAGS'), row: (o) => [member(o, 'name'), description(o), tags(o)] },
  cloudaccount: {
    columns: c('NAME', 'DESCRIPTION', 'PROVIDER', 'INFO', 'CREATED', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), member(o, 'provider'), providerInfo(o), created(o, ctx), tags(o)],
  },
  secret: { columns: c('NAME', 'DESCRIPTION', 'TYPE', 'CREATED', 'TAGS'), row: (o, ctx) => [member(o, 'name'), description(o), member(o, 'type'), created(o, ctx), tags(o)] },
  serviceaccount: {
    columns: c('NAME', 'DESCRIPTION', 'CREATED', 'ORIGIN', 'KEYS', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), created(o, ctx), member(o, 'origin'), list(member(o, 'keys')).map((k) => `${String(member(k, 'name'))}`).join('\n'), tags(o)],
  },
  event: { columns: c('ID', 'STATUS', 'CREATED', 'CONTEXT'), row: (o, ctx) => [member(o, 'id'), member(o, 'status'), created(o, ctx), keyValues(o, 'context')] },
  location: {
    columns: c('NAME', 'DESCRIPTION', 'PROVIDER', 'ENABLED', 'REGION', 'ORIGIN', 'TAGS'),
    row: (o) => [member(o, 'name'), description(o), member(o, 'provider'), !!at(o, 'spec.enabled'), member(o, 'region'), member(o, 'origin'), tags(o)],
  },
  user: {
    columns: c('ID', 'FULL NAME', 'EMAIL', 'CREATED', 'IDP', 'TAGS'),
    row: (o, ctx) => [member(o, 'id'), member(o, 'name'), member(o, 'email'), created(o, ctx), member(o, 'idp'), tags(o)],
  },
  group: {
    columns: c('NAME', 'DESCRIPTION', 'CREATED', 'FILTER', 'ORIGIN', 'TAGS'),
    row: (o, ctx) => [
      member(o, 'name'), description(o), created(o, ctx),
      [member(o, 'memberLinks') ? 'links' : '', member(o, 'memberQuery') ? 'query' : ''].filter(Boolean).join('+'),
      member(o, 'origin'), tags(o),
    ],
  },
  policy: {
    columns: c('NAME', 'DESCRIPTION', 'CREATED', 'TARGET KIND', 'MATCHES', 'ORIGIN', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), created(o, ctx), member(o, 'targetKind'), matches(o), member(o, 'origin'), tags(o)],
  },
  identity: {
    columns: c('NAME', 'DESCRIPTION', 'GVC', 'LOCAL NAME', 'CREATED', 'PROVIDERS', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), gvcOf(o), at(o, 'status.objectName'), created(o, ctx), providers(o), tags(o)],
  },
  ipset: {
    columns: c('NAME', 'DESCRIPTION', 'LINK', 'LOCATIONS', 'TAGS'),
    row: (o) => [
      member(o, 'name'), description(o), at(o, 'spec.link') || '',
      list(at(o, 'spec.locations')).map((l) => `${last(member(l, 'name'))},${String(member(l, 'retentionPolicy'))}`).join('\n'),
      tags(o),
    ],
  },
  gvc: {
    columns: c('NAME', 'DESCRIPTION', 'CREATED', 'ALIAS', 'DOMAIN', 'LOCATIONS', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), created(o, ctx), member(o, 'alias'), at(o, 'spec.domain'), gvcLocations(o), tags(o)],
  },
  deployment: {
    columns: c('NAME/LOCATION', 'MODIFIED', 'STATUS'),
    row: (o, ctx) => [member(o, 'name'), timestamp(o, 'lastModified', ctx), keyValues(o, 'status')],
  },
  workload: {
    columns: c('NAME', 'DESCRIPTION', 'GVC', 'READY', 'CREATED', 'ENDPOINT', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), gvcOf(o), at(o, 'status.readyLatest'), created(o, ctx), at(o, 'status.endpoint'), tags(o)],
  },
  dbcluster: {
    columns: c('NAME', 'DESCRIPTION', 'GVC', 'CREATED', 'ALIAS', 'DEFAULT SIZE', 'LOCATIONS', 'TAGS'),
    row: (o, ctx) => [
      member(o, 'name'), description(o), gvcOf(o), created(o, ctx), member(o, 'alias'), at(o, 'spec.postgres.defaults.size'),
      list(at(o, 'spec.postgres.locations')).map((l) => (member(l, 'writable') ? `${String(member(l, 'name'))} (writable)` : member(l, 'name'))).join('\n'),
      tags(o),
    ],
  },
  volumeset: {
    columns: c('NAME', 'DESCRIPTION', 'GVC', 'CREATED', 'PERFORMANCE CLASS', 'FILE SYSTEM TYPE', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), gvcOf(o), created(o, ctx), at(o, 'spec.performanceClass'), at(o, 'spec.fileSystemType'), tags(o)],
  },
  memcachecluster: {
    columns: c('NAME', 'DESCRIPTION', 'CREATED', 'NODE COUNT', 'NODE SIZE', 'LOCATIONS', 'TAGS'),
    row: (o, ctx) => [
      member(o, 'name'), description(o), created(o, ctx), at(o, 'spec.nodeCount'),
      at(o, 'spec') === undefined ? '' : `${String(at(o, 'spec.nodeSizeGiB'))} GiB`, specLocations(o), tags(o),
    ],
  },
  mk8s: {
    columns: c('NAME', 'ALIAS', 'DESCRIPTION', 'CREATED', 'VERSION', 'LOCATION', 'PROVIDER', 'ADDONS', 'TAGS'),
    row: (o, ctx) => {
      const provider = at(o, 'spec.provider');
      const addOns = at(o, 'spec.addOns');
      return [
        member(o, 'name'), member(o, 'alias'), description(o), created(o, ctx), at(o, 'spec.version'), at(o, 'status.homeLocation'),
        provider && typeof provider === 'object' ? Object.keys(provider)[0] : '',
        addOns && typeof addOns === 'object' ? Object.keys(addOns).sort().join('\n') : '',
        tags(o),
      ];
    },
  },
  spicedbcluster: {
    columns: c('NAME', 'DESCRIPTION', 'CREATED', 'VERSION', 'LOCATIONS', 'ENDPOINT', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), description(o), created(o, ctx), at(o, 'spec.version'), specLocations(o), at(o, 'status.externalEndpoint'), tags(o)],
  },
  quota: {
    columns: c('ID', 'NAME', 'DESCRIPTION', 'ORIGIN', 'CURRENT', 'MAX', 'UNIT', 'DIMENSIONS'),
    row: (o) => [member(o, 'id'), member(o, 'name'), description(o), member(o, 'origin'), member(o, 'current'), member(o, 'max'), member(o, 'unit'), keyValues(o, 'dimensions')],
  },
  task: {
    columns: c('ID', 'DESCRIPTION', 'TYPE', 'TARGET', 'CREATED', 'STATUS'),
    row: (o, ctx) => [member(o, 'id'), description(o), member(o, 'type'), member(o, 'targetEmail'), created(o, ctx), member(o, 'status')],
  },
  agent: { columns: c('NAME', 'DESCRIPTION', 'CREATED', 'TAGS'), row: (o, ctx) => [member(o, 'name'), description(o), created(o, ctx), tags(o)] },
  image: {
    columns: c('NAME', 'PULL', 'DIGEST', 'CREATED', 'TAGS'),
    row: (o, ctx) => [member(o, 'name'), member(o, 'name'), cut(o, 'digest', 16), created(o, ctx), tags(o)],
  },
  auditctx: { columns: c('NAME', 'DESCRIPTION', 'ORIGIN', 'TAGS'), row: (o) => [member(o, 'name'), description(o), member(o, 'origin'), tags(o)] },
};

/** The table model of a kind, when it has one. */
export function modelOf(kind: string): Model | undefined {
  return Object.prototype.hasOwnProperty.call(MODELS, kind) ? MODELS[kind] : undefined;
}

/** The kinds with a table. */
export const TABLE_KINDS: readonly string[] = Object.keys(MODELS);

export type { Item };

/**
 * Tables the platform CLI prints only when a command names them (its `_hints.kind`), never for an
 * answer's own kind: `flattenedPermissions`, the text of `X permissions` (one row per permission, with
 * the permissions it implies).
 */
const HINTED: Readonly<Record<string, Model>> = {
  flattenedPermissions: {
    columns: c('NAME', 'DESCRIPTION', 'IMPLIES'),
    row: (o) => {
      const implied = member(member(o, 'implied'), String(member(o, 'name')));
      return [member(o, 'name'), description(o), implied ? (Array.isArray(implied) ? implied : [implied]).join(', ') : ''];
    },
  },
};

/** A table a command names (`format`'s `kind`): a hinted one, else the kind's own. */
export function hintedModelOf(kind: string): Model | undefined {
  return Object.prototype.hasOwnProperty.call(HINTED, kind) ? HINTED[kind] : modelOf(kind);
}
