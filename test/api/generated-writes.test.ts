/**
 * Generated writes (seeded; `API_WRITES_SEED` replays): a random sequence of creates, replaces,
 * patches and deletes through the API, valid and invalid, interleaved with edits of the config file
 * (each applied by a reload) and restarts of `up` on the same folder. A model of the rule "per
 * record, the later change wins, through the API or from the file" says what each record must be.
 * After every invalid write nothing changed (records and generation); at the end the API's list, the
 * data plane's routes (a host through up's listener answers other than 404 exactly when its workload
 * is there) and a fresh `up` on the same folder agree with the model, versions included.
 */
import t from 'tap';
import http from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Up } from '../../src/roles/up.js';
import { upOnFile } from '../helpers/api.js';
import { request } from '../helpers/harness.js';
import { tempDir } from '../mesh/fixtures.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('API_WRITES_SEED', 20261208);
const NAMES = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5'];
const BASE = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
];

/** A workload `up` starts no process for (an image only): routed, never started. */
function workload(name: string, description: string, minScale: number | string = 1): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc: 'g1', description,
    spec: {
      type: 'standard',
      containers: [{ name: 'main', image: 'nginx', ports: [{ number: 80, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale, maxScale: 3 } },
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
    },
  };
}

t.test(`generated writes, file edits and restarts agree (seed ${SEED})`, async (t) => {
  const random = prng(SEED);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const dir = await tempDir(t, 'svcproxy-gen-');
  const file = join(dir, 'records.json');
  const fileRecords = new Map<string, string>([['w0', 'file-init'], ['w1', 'file-init']]);
  const writeFileRecords = (): Promise<void> => writeFile(file, JSON.stringify([...BASE, ...[...fileRecords].map(([n, d]) => workload(n, d))]));
  await writeFileRecords();
  const model = new Map<string, string>(fileRecords);
  const start = (): Promise<Up> => upOnFile(dir, file, 2);
  let up = await start();
  t.teardown(() => up.stop(1000));
  const key = (await readFile(up.operatorKeyFile, 'utf8')).trim();
  const call = (method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, any> }> => {
    const api = new URL(up.api.url!);
    return new Promise((resolve, reject) => {
      const req = http.request({ host: api.hostname, port: api.port, method, path, agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode!, json: text === '' ? {} : JSON.parse(text) as Record<string, any> });
        });
      });
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  };
  const W = '/org/acme/gvc/g1/workload';
  const state = (): string => JSON.stringify([up.runtime.store.current.generation, up.runtime.store.current.records]);
  const counts = { put: 0, patch: 0, delete: 0, invalid: 0, file: 0, restart: 0 };

  // Where each kind of step starts in [0, 1): a kind that has not run by the last steps is made to run.
  const KIND_AT = { put: 0, patch: 0.25, delete: 0.4, invalid: 0.55, file: 0.75, restart: 0.95 } as const;
  const STEPS = 150;
  for (let step = 0; step < STEPS; step++) {
    const name = pick(NAMES);
    const missing = (Object.keys(KIND_AT) as (keyof typeof KIND_AT)[]).filter((k) => counts[k] === 0);
    const r = STEPS - step <= missing.length ? KIND_AT[missing[0]!] : random();
    const description = `step-${step}`;
    if (r < 0.25) {
      const got = await call('PUT', W, workload(name, description, random() < 0.5 ? String(Math.floor(random() * 3)) : 1));
      t.equal(got.status, model.has(name) ? 200 : 201, `seed ${SEED} step ${step}: PUT ${name}`);
      model.set(name, description);
      counts.put++;
    } else if (r < 0.4) {
      const got = await call('PATCH', `${W}/${name}`, { description, tags: { step: String(step) } });
      t.equal(got.status, model.has(name) ? 200 : 404, `seed ${SEED} step ${step}: PATCH ${name}`);
      if (model.has(name)) model.set(name, description);
      counts.patch++;
    } else if (r < 0.55) {
      const got = await call('DELETE', `${W}/${name}`);
      t.equal(got.status, model.has(name) ? 202 : 404, `seed ${SEED} step ${step}: DELETE ${name}`);
      model.delete(name);
      counts.delete++;
    } else if (r < 0.75) {
      const before = state();
      const bad = pick([
        () => call('PUT', W, { ...workload(name, description), spec: { type: 'sideways', containers: [] } }),
        () => call('PUT', W, { ...workload(name, description), gvc: 'g1', spec: { ...workload(name, '').spec as object, defaultOptions: { timeoutSeconds: 9999 } } }),
        () => call('PUT', W, { ...workload(`Bad_${name}`, description) }),
        () => call('PATCH', `${W}/${name}`, { spec: { defaultOptions: { autoscaling: { minScale: 'many' } } } }),
        // A stale version (a create has none to compare: it is a create).
        () => call(model.has(name) ? 'PUT' : 'PATCH', W + (model.has(name) ? '' : `/${name}`), { ...workload(name, description), version: 999 }),
        () => call('DELETE', '/org/acme/gvc/g1'),
      ]);
      const got = await bad();
      t.ok([400, 404, 409].includes(got.status), `seed ${SEED} step ${step}: refused (${got.status} ${got.json.code})`);
      if (model.has(name) || got.status !== 404) t.ok(state() === before, `seed ${SEED} step ${step}: a refused write left no trace`);
      counts.invalid++;
    } else if (r < 0.95) {
      // The file's version of one record changes: added, edited or removed; the file's applies.
      if (fileRecords.has(name) && random() < 0.4) {
        fileRecords.delete(name);
        model.delete(name);
      } else {
        fileRecords.set(name, `file-${step}`);
        model.set(name, `file-${step}`);
      }
      await writeFileRecords();
      t.equal(await up.runtime.store.reload(), true, `seed ${SEED} step ${step}: reload`);
      counts.file++;
    } else {
      await up.stop(1000);
      up = await start();
      counts.restart++;
    }
  }
  t.ok(Object.values(counts).every((n) => n > 0), `every kind of step ran: ${JSON.stringify(counts)}`);

  const listed = async (): Promise<Map<string, { description: string; version: number }>> => {
    const out = new Map<string, { description: string; version: number }>();
    let path: string | undefined = W;
    while (path !== undefined) {
      const page = await call('GET', path);
      t.equal(page.status, 200);
      for (const w of page.json.items as { name: string; description: string; version: number }[]) out.set(w.name, { description: w.description, version: w.version });
      path = (page.json.links as { rel: string; href: string }[]).find((l) => l.rel === 'next')?.href;
    }
    return out;
  };
  const api = await listed();
  t.same(new Map([...api].map(([n, w]) => [n, w.description])), model, `seed ${SEED}: the API's records are the model's`);
  const alias = up.runtime.store.current.gvcs.get('g1')!.alias;
  for (const name of NAMES) {
    const got = await request(up.runtime.listeners[0]!.address.port, `${name}-${alias}.app.localhost`, '/');
    t.equal(got.status !== 404, model.has(name), `seed ${SEED}: ${name} routed exactly when it is there (${got.status})`);
  }
  await up.stop(1000);
  up = await start();
  t.same(await listed(), api, `seed ${SEED}: a fresh up on the same folder has the same records and versions`);
});
