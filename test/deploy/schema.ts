/**
 * The manifests of deploy/kubernetes read as kubectl reads them, and checked against the Kubernetes
 * OpenAPI schemas that the `kubernetes-models` package compiles to ajv validators (its model's
 * `validate()`). Those validators check types, enums and required members but, as the OpenAPI
 * schemas set no `additionalProperties: false`, accept any unknown member: a misspelt
 * `imagePullPolcy` or `readinessProbes` passes them. This module closes that gap by running the
 * same validator on a copy whose every object records the members the validator reads: a fixed-shape
 * object's validator reads each member it knows and no other, a map's (labels, ConfigMap data)
 * iterates and reads all of them, so a member never read is one the schema does not know.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const KUBE_DIR = path.join(ROOT, 'deploy/kubernetes');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Obj = Record<string, any>;

export interface Manifest {
  readonly file: string;
  readonly obj: Obj;
}

/** The API objects this folder may hold, by `apiVersion/kind`. */
const MODELS: Readonly<Record<string, { prototype: { validate(): void } }>> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

/**
 * Parses YAML as kubectl does: YAML 1.1 (sigs.k8s.io/yaml), where `0440` is octal and `no` is
 * false, unlike YAML 1.2's defaults; duplicate keys are errors.
 */
export function parseKubeYaml(text: string, source: string): Obj[] {
  return YAML.parseAllDocuments(text, { version: '1.1', uniqueKeys: true }).map((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${source} document ${i}: ${doc.errors.map((e) => e.message).join('; ')}`);
    return doc.toJS() as Obj;
  }).filter((o) => o !== null);
}

/** Every API object of deploy/kubernetes (all files but kustomization.yaml). */
export function loadManifests(dir = KUBE_DIR): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()) {
    for (const obj of parseKubeYaml(readFileSync(path.join(dir, file), 'utf8'), file)) out.push({ file, obj });
  }
  return out;
}

/** The object wrapped so that, once a validator has run on it, `unread()` lists what it never read. */
function traced(value: unknown, at: string, pending: (() => string[])[]): unknown {
  if (Array.isArray(value)) return value.map((v, i) => traced(v, `${at}[${i}]`, pending));
  if (value === null || typeof value !== 'object') return value;
  const read = new Set<string>();
  const inner: Obj = {};
  for (const [k, v] of Object.entries(value)) inner[k] = traced(v, at === '' ? k : `${at}.${k}`, pending);
  pending.push(() => Object.keys(inner).filter((k) => !read.has(k)).map((k) => (at === '' ? k : `${at}.${k}`)));
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (typeof key === 'string') read.add(key);
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
}

/**
 * Every way `obj` fails its kind's schema: the validator's errors (`data/spec/replicas must be
 * integer`) and each member the schema does not know (`spec.replicaz: unknown field`). An object
 * of a kind not in MODELS is itself an error.
 */
export function schemaErrors(obj: Obj): string[] {
  const model = MODELS[`${String(obj.apiVersion)}/${String(obj.kind)}`];
  if (!model) return [`${String(obj.apiVersion)}/${String(obj.kind)}: not a kind this folder may hold`];
  const pending: (() => string[])[] = [];
  const errors: string[] = [];
  try {
    // The model's own validate(), run with the traced copy as `this` (a model built with `new`
    // copies its input, which would hide the reads).
    model.prototype.validate.call(traced(obj, '', pending));
  } catch (err) {
    errors.push((err as Error).message);
  }
  for (const check of pending) for (const member of check()) errors.push(`${member}: unknown field`);
  return errors;
}
