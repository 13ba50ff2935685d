/**
 * `svcproxy validate --config PATH...`: what it checked, said exactly. Record files go through the
 * pipeline `up`, `ingress` and `sidecar` use (load.ts, validate.ts, compile.ts), with the same error
 * lines; errors and warnings name the file and the line of their path (locate.ts). Records of
 * platform kinds svcproxy does not read are counted apart and listed as warnings ("not checked"),
 * never as valid. A file whose document is the rate-limit service's rules (`domain` and
 * `descriptors`, no `kind`: no record has that shape, as every record needs a kind) is checked with
 * that service's own loader (ratelimit/service/rules.ts), so its messages are the ones `svcproxy
 * ratelimit` prints, with the line of each path added. Exit code 0 when nothing is wrong, 1 with
 * every error. Never throws for bad input; the caller writes the lines.
 */
import { readFile } from 'node:fs/promises';
import jsyaml from 'js-yaml';
import { rulesFrom } from '../ratelimit/service/rules.js';
import { readYaml, type YamlLines } from '../yaml.js';
import { asApplied } from './applied.js';
import { validateConverted } from './convert.js';
import { compile } from './compile.js';
import { filesOf, parseRecords, reason } from './load.js';
import { lineAlong, locateFindings, parsePath, type ReadText } from './locate.js';
import type { Settings } from './model.js';
import { PLATFORM_KINDS, type SourcedRecord } from './records.js';
import { checkSettings } from './snapshot.js';
import { CHECKED_KINDS, isCheckedKind, isRulesDocument, validate } from './validate.js';
import { count } from '../summary.js';

export interface ValidateReport {
  readonly exitCode: 0 | 1;
  /** Lines for stdout (without their newline): the summary. */
  readonly stdout: readonly string[];
  /** Lines for stderr: every error, then every warning (`warning: ` first), then the verdict on failure. */
  readonly stderr: readonly string[];
}


/** `gvc 1, workload 3` in the order of `order`, then any others in first-seen order. */
function countsText(counts: ReadonlyMap<string, number>, order: readonly string[] = []): string {
  const keys = [...order.filter((k) => counts.has(k)), ...[...counts.keys()].filter((k) => !order.includes(k))];
  return keys.map((k) => `${k} ${counts.get(k)}`).join(', ');
}

/** `FILE: domain.descriptors[0].key: message` → `FILE:LINE: domain...` (the rules loader's lines name no line). */
function rulesLine(error: string, file: string, root: unknown, lines: YamlLines): string {
  const head = `${file}: `;
  if (!error.startsWith(`${head}domain`)) return error; // syntax errors already carry theirs
  const rest = error.slice(head.length);
  const steps = parsePath(rest.slice(0, rest.indexOf(': ')));
  // The path starts at the document, called `domain`; `domain` alone is also the member of that name.
  const line = lineAlong(root, steps.length === 1 ? steps : steps.slice(1), { lines, first: 1 });
  return line === undefined ? error : `${file}:${line}: ${rest}`;
}

function checkRules(sources: readonly { file: string; source: string }[]): { errors: string[]; domains: string[] } {
  if (sources.length === 0) return { errors: [], domains: [] };
  const result = rulesFrom(sources);
  if (result.ok) return { errors: [], domains: [...result.rules.domains.keys()] };
  const errors = result.errors.map((error) => {
    const source = sources.find((s) => error.startsWith(`${s.file}: `));
    if (source === undefined) return error;
    const read = readYaml(source.source, { schema: jsyaml.FAILSAFE_SCHEMA });
    if (!read.ok) return error;
    const root = read.docs.find((d) => d.value !== null && d.value !== undefined)?.value;
    return rulesLine(error, source.file, root, read.lines);
  });
  return { errors, domains: [] };
}

/** Checks the files and folders of `paths` as `svcproxy validate` does; `read` reads a file (tests give their own). */
export async function validateReport(paths: readonly string[], settings: Settings, read: ReadText = (f) => readFile(f, 'utf8')): Promise<ValidateReport> {
  const errors: string[] = [...checkSettings(settings)];
  const records: SourcedRecord[] = [];
  const rulesSources: { file: string; source: string }[] = [];
  let unread = false;
  for (const path of paths) {
    const { files, error } = await filesOf(path);
    if (error !== undefined) {
      errors.push(error);
      unread = true;
    }
    for (const file of files) {
      let text: string;
      try {
        text = await read(file);
      } catch (e) {
        errors.push(`${file}: ${reason(e)}`);
        unread = true;
        continue;
      }
      const parsed = parseRecords(text, file);
      if (parsed.errors.length > 0) unread = true;
      errors.push(...parsed.errors);
      if (parsed.records.some((r) => isRulesDocument(r.record))) rulesSources.push({ file, source: text });
      else records.push(...parsed.records);
    }
  }

  const checked = new Map<string, number>();
  const skipped = new Map<string, number>();
  for (const { record } of records) {
    const kind = record.kind;
    if (isCheckedKind(kind)) checked.set(kind, (checked.get(kind) ?? 0) + 1);
    // Any other kind is an error (validate.ts), neither checked nor skipped.
    else if (typeof kind === 'string' && PLATFORM_KINDS.includes(kind)) skipped.set(kind, (skipped.get(kind) ?? 0) + 1);
  }

  const warnings: string[] = [];
  // As `up`: a file that does not parse stops the records' check (its records may be others' link targets).
  if (!unread) {
    const { records: applied, result } = validateConverted(asApplied(records, settings.gvc), settings);
    const located = await locateFindings([...result.errorFindings, ...result.warningFindings], applied, read);
    errors.push(...located.slice(0, result.errorFindings.length));
    warnings.push(...located.slice(result.errorFindings.length));
    if (errors.length === 0) {
      try {
        compile(applied, settings, 1, result.warnings, result.catalog);
      } catch (e) {
        errors.push(`configuration: internal error: ${(e as Error).message}`);
      }
    }
  }
  const rules = checkRules(rulesSources);
  errors.push(...rules.errors);

  const notChecked = [...skipped.values()].reduce((a, b) => a + b, 0);
  const total = [...checked.values()].reduce((a, b) => a + b, 0);
  const verdict = errors.length === 0 ? 'valid' : 'invalid';
  const stdout: string[] = [];
  if (records.length > 0 || rulesSources.length === 0) {
    const kinds = total === 0 ? '' : ` (${countsText(checked, CHECKED_KINDS)})`;
    const skippedText = notChecked === 0 ? '' : `; ${notChecked} not checked, of kinds svcproxy does not read (${countsText(skipped)})`;
    stdout.push(`${verdict}: ${count(total, 'record')} checked${kinds}${skippedText}`);
  }
  if (rulesSources.length > 0) {
    const domains = rules.domains.length === 0 ? '' : ` (domain${rules.domains.length === 1 ? '' : 's'} ${rules.domains.join(', ')})`;
    stdout.push(`${verdict}: ${count(rulesSources.length, 'rate-limit rules file')} checked${domains}`);
  }
  const stderr = [...errors, ...warnings.map((w) => `warning: ${w}`)];
  if (errors.length > 0) stderr.push(`svcproxy: configuration invalid (${count(errors.length, 'error')})`);
  return { exitCode: errors.length === 0 ? 0 : 1, stdout, stderr };
}
