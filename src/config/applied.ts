/**
 * Records read as the platform reads what `cpln apply -f FILE --gvc NAME` sends it (DESIGN §3): a
 * record of a kind that lives in a GVC (workload, deployment, identity, volumeset) and names none (no
 * `gvc` member, no `links` entry naming one) belongs to the GVC `--gvc` names, else to the only GVC
 * the records define. It is given that `gvc` member here, before validation, so everything after
 * (validation, compilation, `up`'s plan, the local platform API) sees it in its GVC. With no `--gvc`
 * and no GVC or several, such a record is left as it is and validation says to pass `--gvc`
 * (validate-common.ts `checkGvc`). A record that changes is copied; the others are returned as they
 * are. Pure; never throws.
 */
import { GVC_SCOPED } from './links.js';
import { workloadGvc, type RawRecord, type SourcedRecord } from './records.js';

/** The GVC of records that name none: `--gvc` when given, else the records' only GVC, else none. */
export function defaultGvc(records: readonly SourcedRecord[], flag: string | undefined): string | undefined {
  if (flag !== undefined && flag !== '') return flag;
  let only: string | undefined;
  for (const { record } of records) {
    if (record.kind !== 'gvc' || typeof record.name !== 'string' || record.name === '' || record.name === only) continue;
    if (only !== undefined) return undefined;
    only = record.name;
  }
  return only;
}

/** Whether `record` is of a GVC-scoped kind and names no GVC in any form. */
export function namesNoGvc(record: RawRecord): boolean {
  return typeof record.kind === 'string' && GVC_SCOPED.has(record.kind)
    && (record.gvc === undefined || record.gvc === null) && workloadGvc(record) === undefined;
}

/** `records` with every record that names no GVC placed in the default one (see the module's comment). */
export function asApplied(records: readonly SourcedRecord[], flag: string | undefined): readonly SourcedRecord[] {
  if (!records.some((s) => namesNoGvc(s.record))) return records;
  const gvc = defaultGvc(records, flag);
  if (gvc === undefined) return records;
  return records.map((s) => (namesNoGvc(s.record) ? { ...s, record: placed(s.record, gvc) } : s));
}

/**
 * A copy of `record` in `gvc`. A record read from a file is deep-frozen (load.ts), so freezing the
 * copy's top keeps it so; one given in memory is left unfrozen, its members being still its caller's
 * (the snapshot freezes a copy of it, frozen.ts).
 */
function placed(record: RawRecord, gvc: string): RawRecord {
  const copy = { ...record, gvc };
  return Object.isFrozen(record) ? Object.freeze(copy) : copy;
}
