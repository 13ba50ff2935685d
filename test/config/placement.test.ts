import { createRequire } from 'node:module';
import t from 'tap';
import { defaultSettings } from '../../src/config/index.js';
import { asInstant, asNumber, compareValues, fuzzyContains } from '../../src/config/location-query.js';
import { queryLocations } from '../../src/config/placement.js';
import type { RawRecord } from '../../src/config/records.js';
import { toSourced } from '../../src/config/snapshot.js';
import { validate } from '../../src/config/validate.js';
import { baseRecords, find, setPath } from '../fixtures/config/base.js';
import { prng, testSeed } from '../helpers/seed.js';

/** Four locations: values of every type, a date-time written in two zones, a list, relations, a bare one. */
const LOCATIONS: readonly RawRecord[] = [
  {
    kind: 'location', name: 'aws-us-west-2', provider: 'aws', region: 'us-west-2', created: '2024-01-15T10:00:00Z',
    tags: { tier: 1, gpu: true, since: '2024-03-01T00:00:00Z', team: 'Edge' },
    status: { latencyMs: 20, ipRanges: ['10.0.0.0/8', '172.16.0.0/12'] },
    links: [{ rel: 'org', href: '/org/acme' }, { rel: 'self', href: '/org/acme/location/aws-us-west-2' }],
  },
  {
    kind: 'location', name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1', created: '2023-12-31',
    tags: { tier: '2', since: '2024-03-01T02:00:00+02:00' }, status: { latencyMs: 9 }, links: [{ rel: 'org', href: '/org/acme' }],
  },
  {
    kind: 'location', name: 'azure-eastus', provider: 'azure', region: 'eastus', created: '2024-01-15T11:00:00+02:00',
    tags: { tier: 10 }, status: { latencyMs: '100' }, links: [{ rel: 'org', href: '/org/other' }],
  },
  { kind: 'location', name: 'byok-lab', provider: 'byok', tags: {}, status: {} },
];
const BY_NAME = new Map(LOCATIONS.map((l) => [l.name as string, l]));
const [AWS, GCP, AZURE, BYOK] = ['aws-us-west-2', 'gcp-us-east1', 'azure-eastus', 'byok-lab'];
const ALL = [AWS, GCP, AZURE, BYOK];

const select = (terms: unknown[], more: Record<string, unknown> = {}) => queryLocations({ kind: 'location', spec: { terms, ...more } }, BY_NAME);

type Case = [term: Record<string, unknown>, expected: string[], why?: string];
const OPS: Readonly<Record<string, Case[]>> = {
  '=': [
    [{ property: 'provider', value: 'aws' }, [AWS]],
    [{ property: 'provider', op: '=', value: 'gcp' }, [GCP]],
    [{ property: 'status.latencyMs', op: '=', value: '20' }, [AWS]],
    [{ property: 'status.latencyMs', op: '=', value: 100 }, [AZURE]],
    [{ property: 'status.latencyMs', op: '=', value: '9.0' }, [GCP]],
    [{ tag: 'tier', op: '=', value: 1 }, [AWS]],
    [{ tag: 'tier', op: '=', value: '2' }, [GCP]],
    [{ tag: 'gpu', op: '=', value: true }, [AWS]],
    [{ tag: 'gpu', op: '=', value: 'true' }, [AWS]],
    [{ tag: 'since', op: '=', value: '2024-03-01T00:00:00Z' }, [AWS, GCP]],
    [{ tag: 'since', op: '=', value: '2024-03-01' }, [AWS, GCP]],
    [{ rel: 'org', op: '=', value: 'acme' }, [AWS, GCP]],
    [{ rel: 'self', op: '=', value: AWS }, [AWS]],
    [{ property: 'status.ipRanges', op: '=', value: '172.16.0.0/12' }, [AWS]],
    [{ property: 'region', op: '=', value: 'US-EAST1' }, []],
    [{ property: 'nothing.here', op: '=', value: 'x' }, []],
  ],
  '!=': [
    [{ property: 'provider', op: '!=', value: 'aws' }, [GCP, AZURE, BYOK]],
    [{ property: 'region', op: '!=', value: 'us-east1' }, [AWS, AZURE, BYOK]],
    [{ property: 'status.latencyMs', op: '!=', value: '100' }, [AWS, GCP, BYOK]],
    [{ tag: 'tier', op: '!=', value: '1' }, [GCP, AZURE, BYOK]],
    [{ rel: 'org', op: '!=', value: 'acme' }, [AZURE, BYOK]],
    [{ property: 'status.ipRanges', op: '!=', value: '10.0.0.0/8' }, [GCP, AZURE, BYOK]],
  ],
  '>': [
    [{ property: 'region', op: '>', value: 'us-east1' }, [AWS]],
    [{ tag: 'tier', op: '>', value: 1 }, [GCP, AZURE]],
    [{ tag: 'tier', op: '>', value: '9' }, [AZURE]],
    [{ property: 'status.latencyMs', op: '>', value: 9 }, [AWS, AZURE]],
    [{ property: 'created', op: '>', value: '2024-01-15T09:30:00Z' }, [AWS]],
    [{ tag: 'since', op: '>', value: '2024-02-29T23:59:59.999Z' }, [AWS, GCP]],
    [{ rel: 'org', op: '>', value: 'acme' }, [AZURE]],
    [{ property: 'provider', op: '>', value: 'B' }, [AWS, GCP, AZURE, BYOK]],
    [{ property: 'provider', op: '>', value: 'b' }, [GCP, BYOK]],
  ],
  '>=': [
    [{ tag: 'tier', op: '>=', value: 2 }, [GCP, AZURE]],
    [{ property: 'created', op: '>=', value: '2024-01-15T09:00:00Z' }, [AWS, AZURE]],
    [{ property: 'region', op: '>=', value: 'us-east1' }, [AWS, GCP]],
    [{ rel: 'org', op: '>=', value: 'acme' }, [AWS, GCP, AZURE]],
  ],
  '<': [
    [{ property: 'status.latencyMs', op: '<', value: 20 }, [GCP]],
    [{ property: 'created', op: '<', value: '2024-01-01' }, [GCP]],
    [{ property: 'region', op: '<', value: 'us' }, [AZURE]],
    [{ tag: 'tier', op: '<', value: '10' }, [AWS, GCP]],
    [{ rel: 'org', op: '<', value: 'b' }, [AWS, GCP]],
  ],
  '<=': [
    [{ property: 'status.latencyMs', op: '<=', value: '20' }, [AWS, GCP]],
    [{ tag: 'since', op: '<=', value: '2024-03-01' }, [AWS, GCP]],
    [{ tag: 'since', op: '<=', value: '2024-02-29T23:00:00-01:00' }, [AWS, GCP]],
    [{ tag: 'since', op: '<=', value: '2024-02-29T23:00:00Z' }, []],
    [{ property: 'provider', op: '<=', value: 'azure' }, [AWS, AZURE]],
  ],
  '~': [
    [{ property: 'region', op: '~', value: 'us-*' }, [AWS, GCP]],
    [{ property: 'name', op: '~', value: '-US-EAST' }, [GCP]],
    [{ property: 'name', op: '~', value: 'US-*1' }, [GCP]],
    [{ property: 'name', op: '~', value: 'aws*2' }, [AWS]],
    [{ property: 'name', op: '~', value: '2*aws' }, []],
    [{ property: 'provider', op: '~', value: 'a?s' }, [], 'a ? is itself'],
    [{ property: 'region', op: '~', value: 'us' }, [AWS, GCP, AZURE]],
    [{ property: 'region', op: '~', value: 'EAST' }, [GCP, AZURE]],
    [{ property: 'region', op: '~', value: '' }, [AWS, GCP, AZURE]],
    [{ property: 'region', op: '~', value: '*' }, [AWS, GCP, AZURE]],
    [{ property: 'region', op: '~', value: 'us-(west)-2' }, []],
    [{ tag: 'team', op: '~', value: 'edge' }, [AWS]],
    [{ rel: 'self', op: '~', value: 'aws-*' }, [AWS]],
    [{ property: 'status.ipRanges', op: '~', value: '172.*' }, [AWS]],
    [{ property: 'status.ipRanges', op: '~', value: '16.0' }, [AWS]],
    [{ tag: 'tier', op: '~', value: 1 }, [AWS, AZURE]],
    [{ tag: 'gpu', op: '~', value: 'TRUE' }, [AWS]],
  ],
  'the subject *': [
    [{ property: '*', op: '~', value: 'east' }, [GCP, AZURE]],
    [{ property: '*', op: '~', value: '172.16' }, [AWS], 'at any depth, in lists'],
    [{ property: '*', op: '=', value: 'byok' }, [BYOK]],
    [{ property: '*', op: '=', value: 9 }, [GCP]],
    [{ property: '*', op: '~', value: 'location' }, [], 'kind is not searched'],
    [{ property: '*', op: '~', value: 'Edge' }, [], 'nor tags'],
    [{ property: '*', op: '~', value: 'acme' }, [], 'nor links'],
    [{ property: '*', op: 'exists' }, ALL],
    [{ tag: '*', op: '~', value: 'edge' }, [AWS]],
    [{ tag: '*', op: '=', value: 2 }, [GCP]],
    [{ tag: '*', op: 'exists' }, [AWS, GCP, AZURE]],
    [{ tag: '*', op: '!exists' }, [BYOK]],
    [{ rel: '*', op: '=', value: 'acme' }, [AWS, GCP]],
    [{ rel: '*', op: '~', value: 'WEST' }, [AWS]],
    [{ rel: '*', op: '!=', value: 'other' }, [AWS, GCP, BYOK]],
  ],
  '=~': [
    [{ property: 'region', op: '=~', value: 'east' }, [GCP, AZURE]],
    [{ property: 'region', op: '=~', value: '^us-' }, [AWS, GCP]],
    [{ property: 'name', op: '=~', value: '(' }, []],
    [{ tag: 'team', op: '=~', value: '^E' }, [AWS]],
    [{ tag: 'tier', op: '=~', value: '^1' }, [AWS, AZURE]],
    [{ rel: 'org', op: '=~', value: '^ot' }, [AZURE]],
  ],
  contains: [
    [{ property: 'region', op: 'contains', value: 'east' }, [GCP, AZURE]],
    [{ property: 'status.ipRanges', op: 'contains', value: '172.16' }, [AWS]],
    [{ tag: 'since', op: 'contains', value: '+02:00' }, [GCP]],
    [{ property: 'name', op: 'contains', value: 'AWS' }, []],
    [{ rel: 'self', op: 'contains', value: 'west' }, [AWS]],
  ],
  exists: [
    [{ property: 'region', op: 'exists' }, [AWS, GCP, AZURE]],
    [{ property: 'status.ipRanges', op: 'exists' }, [AWS]],
    [{ property: 'status', op: 'exists' }, ALL],
    [{ tag: 'gpu', op: 'exists' }, [AWS]],
    [{ rel: 'org', op: 'exists' }, [AWS, GCP, AZURE]],
    [{ rel: 'self', op: 'exists' }, [AWS]],
  ],
  '!exists': [
    [{ property: 'region', op: '!exists' }, [BYOK]],
    [{ tag: 'tier', op: '!exists' }, [BYOK]],
    [{ rel: 'org', op: '!exists' }, [BYOK]],
    [{ rel: 'self', op: '!exists' }, [GCP, AZURE, BYOK]],
  ],
  'malformed (validation reports these; they select nothing, never everything)': [
    [{ property: 'provider', tag: 'tier', value: 'aws' }, []],
    [{ value: 'aws' }, []],
    [{ property: 'provider', op: 'like', value: 'aws' }, []],
    [{ property: 'provider', op: '>' }, []],
    [{ property: 'provider', op: '=', value: { a: 1 } }, []],
    [{ property: 'provider', op: '!=' }, ALL],
  ],
};

for (const [op, cases] of Object.entries(OPS)) {
  t.test(`op ${op}`, async (t) => {
    for (const [term, expected, why] of cases) t.same(select([term]), expected, `${JSON.stringify(term)}${why === undefined ? '' : `: ${why}`}`);
  });
}

t.test('regression: an ordering op used to select every location', async (t) => {
  // The two locations of the demo: `region > X` returned both.
  const two = new Map([...BY_NAME].filter(([name]) => name === AWS || name === GCP));
  t.same(queryLocations({ spec: { terms: [{ property: 'region', op: '>', value: 'us-east1' }] } }, two), [AWS]);
  t.same(queryLocations({ spec: { terms: [{ property: 'region', op: '<', value: 'a' }] } }, two), []);
  t.same(queryLocations({ spec: { terms: [{ rel: 'org', op: '=', value: 'nobody' }] } }, two), []);
  t.same(queryLocations({ spec: { terms: [{ property: 'region', op: '~', value: '*west*' }] } }, two), [AWS]);
});

t.test('regression: ~ is "contains, ignoring case", as the platform\'s own client uses it', async (t) => {
  // Issue 35: `~` was a whole-text wildcard, so `name ~ europe` selected nothing.
  const named = (...names: string[]) => new Map(names.map((name) => [name, { kind: 'location', name, region: name.split('-').slice(1).join('-') }]));
  const locations = named('gcp-europe-west1', 'azure-westeurope', 'aws-us-east-2', 'gcp-us-east1', 'aws-eu-central-1');
  const query = (terms: unknown[]) => queryLocations({ kind: 'location', spec: { terms } }, locations);
  t.same(query([{ property: 'name', op: '~', value: 'europe' }]), ['gcp-europe-west1', 'azure-westeurope']);
  t.same(query([{ property: 'name', op: '~', value: 'EuRoPe' }]), ['gcp-europe-west1', 'azure-westeurope'], 'either case');
  t.same(query([{ property: 'region', op: '~', value: 'us-*' }]), ['aws-us-east-2', 'gcp-us-east1'], 'docs/configuration.md\'s example still holds');
  t.same(query([{ property: 'region', op: '~', value: 'US-*1' }]), ['gcp-us-east1']);
  t.same(query([{ property: 'name', op: '~', value: 'west*europe' }]), ['azure-westeurope'], 'pieces in order');
  t.same(query([{ property: '*', op: '~', value: 'central' }]), ['aws-eu-central-1'], 'cpln\'s bare ~text: every property');
  // cpln helm finds a release's secrets with {op: '~', property: 'name', value: 'cpln-helm-release'}.
  const secrets = new Map(['cpln-helm-release-web-v1', 'cpln-helm-release-web-v2', 'cpln-release-old-v1', 'CPLN-HELM-RELEASE-api-v1', 'other']
    .map((name) => [name, { kind: 'secret', name }]));
  t.same(queryLocations({ kind: 'secret', spec: { match: 'any', terms: [{ op: '~', property: 'name', value: 'cpln-helm-release' }] } }, secrets),
    ['cpln-helm-release-web-v1', 'cpln-helm-release-web-v2', 'CPLN-HELM-RELEASE-api-v1']);
  t.same(queryLocations({ kind: 'secret', spec: { match: 'any', terms: [{ op: '~', property: 'name', value: 'cpln-release' }] } }, secrets),
    ['cpln-release-old-v1'], 'the legacy prefix');
});

t.test('the terms cpln builds from its query options select what they say', async (t) => {
  // The platform's CLI turns `--prop name~europe` and `--prop ~europe` into terms (commands/query.js);
  // evaluated here, they select what a user of `cpln location query` expects.
  const { expressionToTerm } = createRequire(import.meta.url)('@controlplane/cli/dist/src/commands/query.js') as {
    expressionToTerm: (type: string, expr: string) => Record<string, unknown>;
  };
  const locations = new Map(['gcp-europe-west1', 'azure-westeurope', 'aws-us-east-2'].map((name) => [name, { kind: 'location', name, tags: { zone: name.slice(4) } }]));
  const query = (type: string, expr: string) => queryLocations({ spec: { terms: [expressionToTerm(type, expr)] } }, locations);
  t.same(expressionToTerm('property', '~europe'), { op: '~', property: '*', value: 'europe' }, 'what cpln sends for ~text');
  t.same(query('property', 'name~europe'), ['gcp-europe-west1', 'azure-westeurope']);
  t.same(query('property', '~EUROPE'), ['gcp-europe-west1', 'azure-westeurope']);
  t.same(query('property', '*~us-'), ['aws-us-east-2']);
  t.same(query('tag', '~west'), ['gcp-europe-west1', 'azure-westeurope']);
  t.same(query('tag', 'zone~east'), ['aws-us-east-2']);
  t.same(query('property', 'name=aws-us-east-2'), ['aws-us-east-2']);
  t.same(query('property', 'name'), ['gcp-europe-west1', 'azure-westeurope', 'aws-us-east-2'], 'a bare name: exists');
});

t.test('match all, any, none', async (t) => {
  const terms = [{ property: 'provider', value: 'aws' }, { property: 'region', value: 'us-east1' }];
  t.same(select(terms), [], 'all is the default');
  t.same(select(terms, { match: 'all' }), []);
  t.same(select(terms, { match: 'any' }), [AWS, GCP]);
  t.same(select(terms, { match: 'none' }), [AZURE, BYOK]);
  const both = [{ rel: 'org', value: 'acme' }, { tag: 'tier', op: '>', value: 1 }];
  t.same(select(both, { match: 'all' }), [GCP]);
  t.same(select(both, { match: 'any' }), [AWS, GCP, AZURE]);
  t.same(select(both, { match: 'none' }), [BYOK]);
  t.same(select([], { match: 'all' }), ALL, 'no terms: all selects every location');
  t.same(select([], { match: 'any' }), [], 'no terms: any selects none');
  t.same(select([], { match: 'none' }), ALL, 'no terms: none selects every location');
  t.same(queryLocations({}, BY_NAME), ALL, 'an empty query');
  t.same(queryLocations('nonsense', BY_NAME), ALL, 'not an object: no terms');
});

t.test('sort by and order', async (t) => {
  const all = [{ property: 'name', op: 'exists' }];
  const sorted = (by: string, order?: string) => select(all, { sort: order === undefined ? { by } : { by, order } });
  t.same(sorted('status.latencyMs'), [GCP, AWS, AZURE, BYOK], 'numbers numerically (9, 20, "100"), asc by default, missing last');
  t.same(sorted('status.latencyMs', 'desc'), [AZURE, AWS, GCP, BYOK], 'desc; missing still last');
  t.same(sorted('created', 'asc'), [GCP, AZURE, AWS, BYOK], 'date-times as instants (11:00+02:00 is before 10:00Z)');
  t.same(sorted('created', 'desc'), [AWS, AZURE, GCP, BYOK]);
  t.same(sorted('region', 'desc'), [AWS, GCP, AZURE, BYOK], 'text by code units');
  t.same(sorted('name'), [AWS, AZURE, BYOK, GCP]);
  t.same(sorted('tags.tier'), [AWS, GCP, AZURE, BYOK], '1, "2", 10: all numbers');
  t.same(sorted('provider', 'asc'), [AWS, AZURE, BYOK, GCP]);
  t.same(sorted('nothing'), ALL, 'nobody has it: record order');
  t.same(select([{ property: 'region', op: '=~', value: 'us' }], { sort: { by: 'region' } }), [AZURE, GCP, AWS], 'sorts what the terms select');
  const mixed = new Map<string, RawRecord>([['a', { name: 'a', v: 10 }], ['b', { name: 'b', v: 'x' }], ['c', { name: 'c', v: 9 }]]);
  t.same(queryLocations({ spec: { sort: { by: 'v' } } }, mixed), ['a', 'c', 'b'], 'a number among text: all compare as text ("10" < "9" < "x")');
});

t.test('value readings', async (t) => {
  const numbers: [string | number | boolean, number | undefined][] = [
    [20, 20], ['20', 20], ['-1.5', -1.5], ['+.5', 0.5], ['5.', 5], ['2e3', 2000], ['007', 7], ['', undefined], [' 1', undefined],
    ['0x10', undefined], ['Infinity', undefined], ['1e400', undefined], ['1_000', undefined], [true, undefined], ['.', undefined],
  ];
  for (const [v, n] of numbers) t.equal(asNumber(v), n, `number ${JSON.stringify(v)}`);
  const instants: [string, number | undefined][] = [
    ['2024-03-01', Date.UTC(2024, 2, 1)], ['2024-03-01T00:00:00Z', Date.UTC(2024, 2, 1)], ['2024-03-01T02:00:00+02:00', Date.UTC(2024, 2, 1)],
    ['2024-03-01T10:30', Date.UTC(2024, 2, 1, 10, 30)], ['2024-03-01t10:30:00z', Date.UTC(2024, 2, 1, 10, 30)],
    ['2024-03-01 10:30:00-01:30', Date.UTC(2024, 2, 1, 12, 0)], ['2024-03-01T00:00:00.25Z', Date.UTC(2024, 2, 1) + 250],
    ['2024-02-29', Date.UTC(2024, 1, 29)], ['2023-02-29', undefined],
    ['2024-02-30', undefined], ['2024-13-01', undefined], ['2024-01-01T24:00', undefined], ['2024-01-01T10:00+24:00', undefined],
    ['2024-1-01', undefined], ['2024-01-01Z', undefined], ['20240101', undefined],
  ];
  for (const [v, ms] of instants) t.equal(asInstant(v), ms, `instant ${v}`);
  t.equal(new Date(asInstant('0099-01-01') as number).getUTCFullYear(), 99, 'year 99 stays 99');
  t.equal(compareValues('2024-02-30', '2024-03-01'), -1, 'an impossible date compares as text');
  t.equal(compareValues('10', 9), 1, 'numbers before instants');
  t.equal(compareValues('2024', '2024-01-01'), -1, 'a number and a date-time: text');
  t.equal(compareValues(true, 'true'), 0);
});

t.test('validation: an =~ value must compile; a value op without a value is warned about', async (t) => {
  const T = 'spec.staticPlacement.locationQuery.spec.terms[0]';
  const resultOf = (term: Record<string, unknown>) => {
    const records = baseRecords();
    setPath(find(records, 'gvc/demo'), 'spec.staticPlacement.locationQuery', { kind: 'location', spec: { terms: [term] } });
    return validate(toSourced(records), defaultSettings);
  };
  const errorsOf = (term: Record<string, unknown>) => resultOf(term).errors;
  const warningsOf = (term: Record<string, unknown>) => resultOf(term).warnings.filter((w) => w.includes(T));
  t.same(errorsOf({ property: 'region', op: '>', value: 'us-east1' }), []);
  t.same(errorsOf({ property: 'region', op: 'exists' }), []);
  t.same(errorsOf({ rel: 'org', op: '!exists' }), []);
  t.same(errorsOf({ tag: 'tier', op: '<=', value: 3 }), []);
  t.same(errorsOf({ property: 'region', op: '=~', value: '^us-(east|west)' }), []);
  t.same(warningsOf({ property: 'region', op: '>', value: 'us-east1' }), []);
  t.same(warningsOf({ property: 'region', op: 'exists' }), []);
  t.same(errorsOf({ property: 'region', op: '>' }), []);
  t.same(warningsOf({ property: 'region', op: '>' }), [`gvc/demo: ${T}.value: not set: with op > the term holds for no location`]);
  t.same(warningsOf({ property: 'region' }), [`gvc/demo: ${T}.value: not set: with op = the term holds for no location`]);
  t.same(warningsOf({ property: 'region', op: '!=' }), [`gvc/demo: ${T}.value: not set: with op != the term holds for every location`]);
  t.same(errorsOf({ property: 'region', op: '=~', value: '(' }), [`gvc/demo: ${T}.value: does not compile: Invalid regular expression: /(/: Unterminated group`]);
  t.same(errorsOf({ property: 'region', op: '~', value: '(' }), [], 'a wildcard pattern has no syntax to get wrong');
  t.same(errorsOf({ property: 'region', op: 'like' }).length, 1, 'an unknown op: one error, about the op');
});

// ---- generated: the evaluator against a reference written plainly, on random records and terms

const SEED = testSeed('PLACEMENT_SEED', 20261127);
t.comment(`seed ${SEED} (PLACEMENT_SEED=${SEED} replays)`);
const rand = prng(SEED);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
function randomDate(): string {
  const date = `${2023 + Math.floor(rand() * 3)}-${pad(1 + Math.floor(rand() * 12))}-${pad(1 + Math.floor(rand() * 28))}`;
  if (rand() < 0.3) return date;
  const time = `${pad(Math.floor(rand() * 24))}:${pad(Math.floor(rand() * 60))}${rand() < 0.5 ? `:${pad(Math.floor(rand() * 60))}` : ''}`;
  const fraction = time.length > 5 && rand() < 0.3 ? `.${Math.floor(rand() * 1000)}` : '';
  const zone = pick(['', 'Z', `+${pad(Math.floor(rand() * 14))}:${pick(['00', '30', '45'])}`, `-${pad(Math.floor(rand() * 12))}:00`]);
  return `${date}T${time}${fraction}${zone}`;
}
/** Each round leans to one kind of value, so that comparisons of like with like (two date-times) are common. */
let theme: 'mixed' | 'dates' | 'numbers' = 'mixed';
/** A few instants hours apart, each written in a random zone: where text order and time order part. */
const INSTANTS = [Date.UTC(2024, 0, 15, 10), Date.UTC(2024, 0, 15, 9), Date.UTC(2024, 0, 14, 23, 30), Date.UTC(2024, 0, 15)];
function zonedDate(): string {
  const at = pick(INSTANTS) + (rand() < 0.3 ? 1 + Math.floor(rand() * 999) : 0);
  const form = Math.floor(rand() * 4);
  if (form === 0) return new Date(at).toISOString().slice(0, 10);
  const offset = form === 3 ? pick([60, 120, -300, 330, -90, 0]) : 0;
  const local = new Date(at + offset * 60_000).toISOString().slice(0, 23);
  const text = local.endsWith('.000') ? local.slice(0, 19) : local;
  const zone = form === 1 ? '' : form === 2 ? 'Z' : `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
  return `${text}${zone}`;
}
function randomScalar(): string | number | boolean {
  if (theme === 'dates' && rand() < 0.8) return rand() < 0.7 ? zonedDate() : randomDate();
  if (theme === 'numbers' && rand() < 0.8) return rand() < 0.5 ? Math.floor(rand() * 30) - 5 : pick(['7', '-1.5', '1e1', '07', '.5', '10', '9', '20.0', '+3']);
  switch (Math.floor(rand() * 6)) {
    case 0: return Math.floor(rand() * 30) - 5;
    case 1: return pick(['7', '-1.5', '1e1', '07', '.5', '10', '9', '20.0', '+3']);
    case 2: return randomDate();
    case 3: return pick(['us-east1', 'us-west-2', 'US-East1', 'eastus', 'a*b', 'axb', '', 'true', 'Z', 'zz', 'é', 'a?c']);
    case 4: return rand() < 0.5;
    default: return Math.round(rand() * 1000) / 100;
  }
}
function randomValue(): unknown {
  const r = rand();
  if (r < 0.1) return undefined;
  if (r < 0.15) return null;
  if (r < 0.2) return { nested: randomScalar() };
  if (r < 0.35) return Array.from({ length: Math.floor(rand() * 3) }, () => (rand() < 0.9 ? randomScalar() : null));
  return randomScalar();
}
function randomLocation(i: number): RawRecord {
  const loc: Record<string, unknown> = { kind: 'location', name: `loc${i}` };
  const p = randomValue();
  if (p !== undefined) loc.p = p;
  if (rand() < 0.8) {
    const t = randomValue();
    loc.tags = t === undefined ? {} : { t };
  }
  if (rand() < 0.8) {
    loc.links = Array.from({ length: Math.floor(rand() * 3) }, () => ({
      rel: pick(['org', 'self']), href: pick(['/org/acme', '/org/other', '//location/us-east1', '/org/acme/location/eastus', 'not-a-link']),
    }));
  }
  return loc;
}
const OP_NAMES = ['=', '>', '>=', '<', '<=', '!=', '~', '=~', 'exists', '!exists', 'contains'];
function randomTerm(): Record<string, unknown> {
  const term: Record<string, unknown> = pick([{ property: 'p' }, { tag: 't' }, { rel: pick(['org', 'self']) }, { [pick(['property', 'tag', 'rel'])]: '*' }]);
  const op = pick(OP_NAMES);
  if (op !== '=' || rand() < 0.5) term.op = op;
  if (op === '=~') term.value = pick(['^us', 'east$', '[0-9]', '(', 'E', '^$', 'acme|other']);
  else if (op === '~') term.value = pick(['us-*', '*EAST*', '?', '*', 'a?c', 'a*b', '', '2024-*', 'acme', 'o*r', 'us', 'East', 'E*T', '**', '1', 'loc', 'T*:*Z']);
  else if (rand() < 0.95) term.value = rand() < 0.2 ? pick(['acme', 'other', 'us-east1', 'eastus', 'not-a-link']) : randomScalar();
  return term;
}

// The reference: the same rules written as plainly as possible, sharing no code with the evaluator.
function refNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string' || !/^[-+0-9.eE]+$/.test(v)) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}
function refInstant(v: unknown): number | undefined {
  if (typeof v !== 'string' || !/^\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?)?$/.test(v)) return undefined;
  const hasTime = v.includes('T');
  const hasZone = /(Z|[+-]\d\d:\d\d)$/.test(v) && hasTime;
  const ms = Date.parse(hasTime && !hasZone ? `${v}Z` : v);
  return Number.isNaN(ms) ? undefined : ms;
}
function refCompare(a: unknown, b: unknown): number {
  const x = refNumber(a);
  const y = refNumber(b);
  if (x !== undefined && y !== undefined) return x === y ? 0 : x < y ? -1 : 1;
  const s = refInstant(a);
  const u = refInstant(b);
  if (s !== undefined && u !== undefined) return s === u ? 0 : s < u ? -1 : 1;
  const p = String(a);
  const q = String(b);
  return p === q ? 0 : p < q ? -1 : 1;
}
/** `~`: is `*` + pattern + `*` a whole-text match of the text, `*` any run and every other character itself? */
function refFuzzy(text: string, pattern: string): boolean {
  const p = `*${pattern}*`;
  // can[i][j]: does p[0..j) match text[0..i)?
  const can = Array.from({ length: text.length + 1 }, () => new Array<boolean>(p.length + 1).fill(false));
  can[0]![0] = true;
  for (let j = 1; j <= p.length; j++) can[0]![j] = p[j - 1] === '*' && can[0]![j - 1]!;
  for (let i = 1; i <= text.length; i++) {
    for (let j = 1; j <= p.length; j++) {
      const c = p[j - 1];
      if (c === '*') can[i]![j] = can[i - 1]![j]! || can[i]![j - 1]!;
      else can[i]![j] = c === text[i - 1] && can[i - 1]![j - 1]!;
    }
  }
  return can[text.length]![p.length]!;
}
const scalar = (x: unknown) => typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean';
function refLeaves(v: unknown): unknown[] {
  if (scalar(v)) return [v];
  if (Array.isArray(v)) return v.flatMap(refLeaves);
  return typeof v === 'object' && v !== null ? Object.values(v).flatMap(refLeaves) : [];
}
function refSubject(loc: RawRecord, term: Record<string, unknown>): { present: boolean; values: unknown[] } {
  if (term.rel !== undefined) {
    const links = Array.isArray(loc.links) ? loc.links.filter((l) => term.rel === '*' || l.rel === term.rel) : [];
    const names = links.map((l) => {
      const href = l.href as string;
      return href.startsWith('/') ? href.slice(href.lastIndexOf('/') + 1) : href;
    });
    return { present: links.length > 0, values: names };
  }
  if (term.property === '*' || term.tag === '*') {
    // Tags hold scalars or lists of them (objects count as no value); properties are searched at any depth.
    const values = term.tag === '*'
      ? Object.values(loc.tags ?? {}).flatMap((v) => (Array.isArray(v) ? v.filter(scalar) : scalar(v) ? [v] : []))
      : refLeaves(Object.entries(loc).filter(([k]) => k !== 'kind' && k !== 'tags' && k !== 'links').map(([, v]) => v));
    return { present: values.length > 0, values };
  }
  const v = term.tag !== undefined ? (loc.tags as Record<string, unknown> | undefined)?.[term.tag as string] : loc.p;
  const values = Array.isArray(v) ? v.filter(scalar) : scalar(v) ? [v] : [];
  return { present: v !== undefined && v !== null, values };
}
function refHolds(loc: RawRecord, term: Record<string, unknown>): boolean {
  const { present, values } = refSubject(loc, term);
  const op = (term.op ?? '=') as string;
  const value = term.value;
  if (op === 'exists') return present;
  if (op === '!exists') return !present;
  if (value === undefined) return op === '!=';
  const some = (f: (v: unknown) => boolean) => values.some(f);
  switch (op) {
    case '=': return some((v) => refCompare(v, value) === 0);
    case '!=': return !some((v) => refCompare(v, value) === 0);
    case '>': return some((v) => refCompare(v, value) > 0);
    case '>=': return some((v) => refCompare(v, value) >= 0);
    case '<': return some((v) => refCompare(v, value) < 0);
    case '<=': return some((v) => refCompare(v, value) <= 0);
    case 'contains': return some((v) => String(v).indexOf(String(value)) !== -1);
    case '~': return some((v) => refFuzzy(String(v).toLowerCase(), String(value).toLowerCase()));
    case '=~': {
      try {
        const re = new RegExp(String(value));
        return some((v) => re.test(String(v)));
      } catch {
        return false;
      }
    }
    default: return false;
  }
}

t.test(`~ on generated texts and terms agrees with the reference (seed ${SEED})`, async (t) => {
  // Small alphabets, so that pieces occur, repeat and overlap; letters whose lower case is longer (İ).
  const text = (n: number) => Array.from({ length: Math.floor(rand() * n) }, () => pick(['a', 'b', 'A', 'B', '-', '?', 'İ', 'i', '.'])).join('');
  const term = () => Array.from({ length: Math.floor(rand() * 6) }, () => pick(['a', 'b', 'B', '*', '*', '-', '?', 'i', 'İ', '.'])).join('');
  let mismatches = 0;
  for (let round = 0; round < 20_000 && mismatches < 5; round++) {
    const [v, p] = [text(12), term()];
    const expected = refFuzzy(v.toLowerCase(), p.toLowerCase());
    if (fuzzyContains(v, p) !== expected) {
      mismatches++;
      t.equal(fuzzyContains(v, p), expected, `seed ${SEED}: ${JSON.stringify(v)} ~ ${JSON.stringify(p)}`);
    }
  }
  t.equal(mismatches, 0, `20,000 pairs agree (seed ${SEED})`);
  const long = 'a'.repeat(5000);
  t.equal(fuzzyContains(long, `${'a*'.repeat(40)}b`), false, 'many stars over a long text: one scan per piece');
});

t.test(`generated records and terms agree with the reference (seed ${SEED})`, async (t) => {
  let mismatches = 0;
  for (let round = 0; round < 1000 && mismatches < 5; round++) {
    theme = pick(['mixed', 'dates', 'numbers'] as const);
    const locations = Array.from({ length: 1 + Math.floor(rand() * 8) }, (_, i) => randomLocation(i));
    const map = new Map(locations.map((l) => [l.name as string, l]));
    const terms = Array.from({ length: rand() < 0.6 ? 1 : 2 + Math.floor(rand() * 2) }, randomTerm);
    const match = pick(['all', 'any', 'none']);
    const holds = (loc: RawRecord) => terms.map((term) => refHolds(loc, term));
    const expected = locations.filter((loc) => {
      const h = holds(loc);
      return match === 'all' ? h.every(Boolean) : match === 'any' ? h.some(Boolean) : !h.some(Boolean);
    }).map((l) => l.name);
    const got = queryLocations({ spec: { match, terms } }, map);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      mismatches++;
      t.same(got, expected, `seed ${SEED} round ${round}: ${match} ${JSON.stringify(terms)} over ${JSON.stringify(locations)}`);
    }
  }
  t.equal(mismatches, 0, `no mismatches (seed ${SEED})`);
});

t.test(`generated sorts agree with the reference (seed ${SEED})`, async (t) => {
  for (let round = 0; round < 300; round++) {
    theme = pick(['mixed', 'dates', 'numbers'] as const);
    const locations = Array.from({ length: 1 + Math.floor(rand() * 8) }, (_, i) => randomLocation(i));
    const order = pick(['asc', 'desc', undefined]);
    const got = queryLocations({ spec: { sort: { by: 'p', ...(order ? { order } : {}) } } }, new Map(locations.map((l) => [l.name as string, l])));
    const withKey = locations.filter((l) => scalar(l.p));
    const without = locations.filter((l) => !scalar(l.p));
    const kind = withKey.every((l) => refNumber(l.p) !== undefined) ? refNumber
      : withKey.every((l) => refInstant(l.p) !== undefined) ? refInstant : undefined;
    const key = (l: RawRecord) => (kind === undefined ? String(l.p) : kind(l.p) as number);
    // Insertion sort: stable and obviously so.
    const sorted: RawRecord[] = [];
    for (const l of withKey) {
      let i = sorted.length;
      const after = (a: RawRecord, b: RawRecord) => (order === 'desc' ? key(a) < key(b) : key(a) > key(b));
      while (i > 0 && after(sorted[i - 1]!, l)) i--;
      sorted.splice(i, 0, l);
    }
    const expected = [...sorted, ...without].map((l) => l.name);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      t.same(got, expected, `seed ${SEED} round ${round}: by p ${order} over ${JSON.stringify(locations)}`);
      return;
    }
  }
  t.pass('300 generated sorts agree');
});
