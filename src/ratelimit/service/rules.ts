/**
 * Rules of the rate-limit service, in the reference Envoy rate-limit server's YAML format, so an
 * existing rules file works unchanged: one domain per file (`domain`, nested `descriptors` with `key`,
 * optional `value`, `rate_limit {unit, requests_per_unit, unlimited, name, replaces}`, `shadow_mode`,
 * `detailed_metric`), plus svcproxy's `algorithm` (`fixed-window`, the default, or `sliding-window`)
 * on the domain (its default) or inside one `rate_limit` (that rule). A path may be a file or a folder
 * of `.yaml`/`.yml`/`.json` files, one domain each; a domain defined twice is an error.
 *
 * Validation reports every error, each as `FILE: PATH: what is wrong`, where PATH starts at the
 * document, called `domain` (`rules.yaml: domain.descriptors[0].rate_limit.unit: must be one of
 * second, minute, hour, day, month, year`). The result is frozen; `findLimit` (match.ts) only reads it.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isConfigFileName } from '../../config/load.js';
import type { Unit } from '../proto.js';
import jsyaml from 'js-yaml';
import { readYaml } from '../../yaml.js';

export type Algorithm = 'fixed-window' | 'sliding-window';
export const ALGORITHMS: readonly Algorithm[] = ['fixed-window', 'sliding-window'];

export type RuleUnit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'MONTH' | 'YEAR';
/** Window lengths as the reference server divides time: a month is 30 days, a year 365. */
const UNITS: Readonly<Record<string, { unit: RuleUnit; seconds: number }>> = {
  second: { unit: 'SECOND', seconds: 1 },
  minute: { unit: 'MINUTE', seconds: 60 },
  hour: { unit: 'HOUR', seconds: 3600 },
  day: { unit: 'DAY', seconds: 86400 },
  month: { unit: 'MONTH', seconds: 86400 * 30 },
  year: { unit: 'YEAR', seconds: 86400 * 365 },
};

export interface Limit {
  /** `domain.key_value.key2`, as the reference server names a limit (logs and debugging). */
  readonly fullKey: string;
  readonly requestsPerUnit: number;
  /** The wire unit (`RateLimitResponse.RateLimit.Unit`). */
  readonly unit: Unit;
  readonly windowSeconds: number;
  readonly unlimited: boolean;
  readonly shadowMode: boolean;
  readonly name?: string;
  readonly replaces: readonly string[];
  readonly algorithm: Algorithm;
}

export interface RuleNode {
  readonly limit?: Limit;
  /** `key \0 value` → node (rules with a value). */
  readonly exact: ReadonlyMap<string, RuleNode>;
  /** Rules whose value ends in `*`: a value prefix, in written order. */
  readonly prefixes: readonly { readonly key: string; readonly prefix: string; readonly node: RuleNode }[];
  /** `key` → node (rules without a value: any value). */
  readonly any: ReadonlyMap<string, RuleNode>;
}

export interface DomainRules {
  readonly name: string;
  readonly file: string;
  readonly algorithm: Algorithm;
  readonly root: RuleNode;
}

export interface RuleSet {
  readonly domains: ReadonlyMap<string, DomainRules>;
  readonly files: readonly string[];
}

export type RulesResult = { ok: true; rules: RuleSet } | { ok: false; errors: string[] };

const ROOT_MEMBERS = ['domain', 'descriptors', 'algorithm'];
const DESCRIPTOR_MEMBERS = ['key', 'value', 'rate_limit', 'descriptors', 'shadow_mode', 'detailed_metric'];
const RATE_LIMIT_MEMBERS = ['unit', 'requests_per_unit', 'unlimited', 'name', 'replaces', 'algorithm'];
const UINT32_MAX = 4294967295;

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Values are read with YAML's failsafe schema (every scalar a string), as the reference reads `value: 012` as "012". */
function text(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function bool(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (typeof v !== 'string') return undefined;
  // YAML 1.1 spellings too, as the reference server's parser reads them.
  if (/^(?:true|True|TRUE|yes|Yes|YES|on|On|ON)$/.test(v)) return true;
  if (/^(?:false|False|FALSE|no|No|NO|off|Off|OFF)$/.test(v)) return false;
  return undefined;
}

function uint32(v: unknown): number | undefined {
  const s = typeof v === 'number' ? String(v) : typeof v === 'string' ? v.trim() : undefined;
  if (s === undefined || !/^\d+$/.test(s)) return undefined;
  const n = Number(s);
  return n <= UINT32_MAX ? n : undefined;
}

function isAbsent(v: unknown): boolean {
  return v === undefined || v === null || v === '';
}

class Report {
  readonly errors: string[] = [];
  constructor(private readonly file: string) {}
  error(path: string, message: string): void {
    this.errors.push(`${this.file}: ${path}: ${message}`);
  }
}

function unknownMembers(o: Obj, allowed: readonly string[], at: string, r: Report): void {
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k)) r.error(`${at}.${k}`, `unknown member (allowed: ${allowed.join(', ')})`);
  }
}

function algorithmOf(v: unknown, at: string, r: Report): Algorithm | undefined {
  if (isAbsent(v)) return undefined;
  const s = text(v)?.trim().toLowerCase();
  if (s === 'fixed-window' || s === 'sliding-window') return s;
  r.error(at, `must be one of ${ALGORITHMS.join(', ')}`);
  return undefined;
}

interface Building {
  limit?: Limit;
  exact: Map<string, RuleNode>;
  prefixes: { key: string; prefix: string; node: RuleNode }[];
  any: Map<string, RuleNode>;
}

function rateLimitOf(v: unknown, at: string, fullKey: string, shadowMode: boolean, domainAlgorithm: Algorithm, r: Report): Limit | undefined {
  if (!isObj(v)) {
    r.error(at, 'must be a mapping');
    return undefined;
  }
  unknownMembers(v, RATE_LIMIT_MEMBERS, at, r);
  const before = r.errors.length;
  const unlimitedRaw = v.unlimited;
  const unlimited = isAbsent(unlimitedRaw) ? false : bool(unlimitedRaw);
  if (unlimited === undefined) r.error(`${at}.unlimited`, 'must be true or false');
  let unit: { unit: RuleUnit; seconds: number } | undefined;
  if (unlimited) {
    if (!isAbsent(v.unit)) r.error(`${at}.unit`, 'must not be set when unlimited is true');
  } else {
    unit = UNITS[(text(v.unit) ?? '').trim().toLowerCase()];
    if (!unit) r.error(`${at}.unit`, 'must be one of second, minute, hour, day, month, year');
  }
  let requests = 0;
  if (!unlimited) {
    const n = uint32(v.requests_per_unit);
    if (n === undefined) r.error(`${at}.requests_per_unit`, isAbsent(v.requests_per_unit) ? 'is required' : `must be a whole number from 0 to ${UINT32_MAX}`);
    else requests = n;
  }
  const name = isAbsent(v.name) ? undefined : text(v.name);
  if (!isAbsent(v.name) && name === undefined) r.error(`${at}.name`, 'must be a string');
  const replaces: string[] = [];
  if (!isAbsent(v.replaces)) {
    if (!Array.isArray(v.replaces)) r.error(`${at}.replaces`, 'must be a list');
    else {
      v.replaces.forEach((entry, i) => {
        const p = `${at}.replaces[${i}]`;
        if (!isObj(entry)) return r.error(p, 'must be a mapping with name');
        unknownMembers(entry, ['name'], p, r);
        const n = text(entry.name)?.trim();
        if (!n) return r.error(`${p}.name`, 'must be a non-empty string');
        if (n === name) return r.error(`${p}.name`, 'must not name the limit that replaces it');
        replaces.push(n);
      });
    }
  }
  const algorithm = algorithmOf(v.algorithm, `${at}.algorithm`, r) ?? domainAlgorithm;
  if (r.errors.length > before) return undefined;
  return Object.freeze({
    fullKey,
    requestsPerUnit: requests,
    unit: unit?.unit ?? 'UNKNOWN',
    windowSeconds: unit?.seconds ?? 0,
    unlimited: unlimited === true,
    shadowMode,
    ...(name ? { name } : {}),
    replaces: Object.freeze(replaces),
    algorithm,
  });
}

function descriptorsOf(list: unknown, at: string, parentKey: string, domainAlgorithm: Algorithm, r: Report): RuleNode {
  const node: Building = { exact: new Map(), prefixes: [], any: new Map() };
  if (isAbsent(list)) return freeze(node);
  if (!Array.isArray(list)) {
    r.error(at, 'must be a list');
    return freeze(node);
  }
  const seen = new Map<string, string>();
  list.forEach((d, i) => {
    const p = `${at}[${i}]`;
    if (!isObj(d)) return r.error(p, 'must be a mapping with key');
    unknownMembers(d, DESCRIPTOR_MEMBERS, p, r);
    const key = text(d.key);
    if (!key) r.error(`${p}.key`, 'must be a non-empty string');
    const value = isAbsent(d.value) ? undefined : text(d.value);
    if (!isAbsent(d.value) && value === undefined) r.error(`${p}.value`, 'must be a string');
    const shadow = isAbsent(d.shadow_mode) ? false : bool(d.shadow_mode);
    if (shadow === undefined) r.error(`${p}.shadow_mode`, 'must be true or false');
    // Accepted for compatibility; svcproxy's metrics are per domain, so it changes nothing.
    if (!isAbsent(d.detailed_metric) && bool(d.detailed_metric) === undefined) r.error(`${p}.detailed_metric`, 'must be true or false');
    const composite = value === undefined ? (key ?? '') : `${key}_${value}`;
    const fullKey = `${parentKey}.${composite}`;
    const limit = isAbsent(d.rate_limit) ? undefined : rateLimitOf(d.rate_limit, `${p}.rate_limit`, fullKey, shadow === true, domainAlgorithm, r);
    const child = descriptorsOf(d.descriptors, `${p}.descriptors`, fullKey, domainAlgorithm, r);
    if (!key) return;
    const first = seen.get(composite);
    if (first !== undefined) return r.error(p, `duplicate descriptor ${JSON.stringify(composite)} (first at ${first})`);
    seen.set(composite, p);
    const built: RuleNode = limit ? Object.freeze({ ...child, limit }) : child;
    if (value === undefined) node.any.set(key, built);
    else if (value.endsWith('*')) node.prefixes.push({ key, prefix: value.slice(0, -1), node: built });
    else node.exact.set(`${key}\u0000${value}`, built);
  });
  return freeze(node);
}

function freeze(node: Building): RuleNode {
  return Object.freeze({
    exact: node.exact,
    prefixes: Object.freeze(node.prefixes.map((p) => Object.freeze(p))),
    any: node.any,
  });
}

/** Parse one rules document. `file` is used in the error messages only. */
export function parseRules(source: string, file: string): { ok: true; domain: DomainRules } | { ok: false; errors: string[] } {
  const r = new Report(file);
  const read = readYaml(source, { schema: jsyaml.FAILSAFE_SCHEMA });
  if (!read.ok) {
    const { line, column, message } = read.error;
    r.errors.push(`${file}: line ${line}, column ${column}: ${message}`);
    return { ok: false, errors: r.errors };
  }
  const contents = read.docs.filter((d) => d.value !== null && d.value !== undefined);
  if (contents.length !== 1) {
    r.errors.push(`${file}: must hold exactly one YAML document (one domain), found ${contents.length}`);
    return { ok: false, errors: r.errors };
  }
  const root: unknown = contents[0]!.value;
  if (!isObj(root)) {
    r.error('domain', 'must be a mapping with domain and descriptors');
    return { ok: false, errors: r.errors };
  }
  unknownMembers(root, ROOT_MEMBERS, 'domain', r);
  const name = text(root.domain)?.trim();
  if (!name) r.error('domain', 'must be a non-empty string');
  const algorithm = algorithmOf(root.algorithm, 'domain.algorithm', r) ?? 'fixed-window';
  const tree = descriptorsOf(root.descriptors, 'domain.descriptors', name ?? '', algorithm, r);
  if (r.errors.length > 0 || !name) return { ok: false, errors: r.errors };
  return { ok: true, domain: Object.freeze({ name, file, algorithm, root: tree }) };
}

/** The rules files a path names: the file itself, or a folder's config files in name order. */
async function rulesFiles(path: string): Promise<string[]> {
  const info = await stat(path);
  if (!info.isDirectory()) return [path];
  const names = (await readdir(path)).filter(isConfigFileName).sort();
  return names.map((n) => join(path, n));
}

/** Load every file of every path; all errors of all files, or the rule set. */
export async function loadRules(paths: readonly string[]): Promise<RulesResult> {
  const errors: string[] = [];
  const domains = new Map<string, DomainRules>();
  const files: string[] = [];
  for (const path of paths) {
    let list: string[];
    try {
      list = await rulesFiles(path);
    } catch (e) {
      errors.push(`${path}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      continue;
    }
    if (list.length === 0) errors.push(`${path}: no rules files (.yaml, .yml, .json) in this folder`);
    for (const file of list) {
      files.push(file);
      let source: string;
      try {
        source = await readFile(file, 'utf8');
      } catch (e) {
        errors.push(`${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        continue;
      }
      const parsed = parseRules(source, file);
      if (!parsed.ok) {
        errors.push(...parsed.errors);
        continue;
      }
      const other = domains.get(parsed.domain.name);
      if (other) {
        errors.push(`${file}: domain: ${JSON.stringify(parsed.domain.name)} is already defined in ${other.file}`);
        continue;
      }
      domains.set(parsed.domain.name, parsed.domain);
    }
  }
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, rules: Object.freeze({ domains, files: Object.freeze(files) }) };
}

/** Rules from documents held in memory (tests, embedding). */
export function rulesFrom(sources: readonly { file: string; source: string }[]): RulesResult {
  const errors: string[] = [];
  const domains = new Map<string, DomainRules>();
  for (const { file, source } of sources) {
    const parsed = parseRules(source, file);
    if (!parsed.ok) errors.push(...parsed.errors);
    else if (domains.has(parsed.domain.name)) errors.push(`${file}: domain: ${JSON.stringify(parsed.domain.name)} is already defined in ${domains.get(parsed.domain.name)!.file}`);
    else domains.set(parsed.domain.name, parsed.domain);
  }
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, rules: Object.freeze({ domains, files: Object.freeze(sources.map((s) => s.file)) }) };
}
