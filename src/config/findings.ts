/**
 * A finding of validation (an error or a warning) kept with the record it is about, so its line can
 * name where the record is: `FILE:LINE: kind/name: json.path: what is wrong`. The `kind/name: path:
 * message` part is what it always was; the `FILE:LINE: ` before it is the record's file and line
 * (only `FILE: ` while the line is unknown, as for a JSON record before locate.ts looked; nothing for
 * records given in memory, whose source is `inline`). locate.ts may later move the line to the path's
 * own line. Findings not about one record (settings) carry no record.
 */
import type { Report } from './schema.js';
import type { SourcedRecord } from './records.js';

export interface Finding {
  readonly record?: SourcedRecord;
  /** `kind/name`. */
  readonly label: string;
  /** The JSON path in the record (`spec.containers[0].name`); `''` for the record itself. */
  readonly at: string;
  readonly message: string;
}

/** The source of records given in memory without one (snapshot.ts `toSourced`). */
export const INLINE = 'inline';

/** `FILE:LINE` (or `FILE` when the line is unknown), as other messages name a record's place. */
export function placeOf(record: SourcedRecord, line = record.line): string {
  return line === undefined ? record.source : `${record.source}:${line}`;
}

/** The line of a finding; `line` replaces the record's own (locate.ts). */
export function findingText(f: Finding, line = f.record?.line): string {
  const place = f.record === undefined || (f.record.source === INLINE && line === undefined) ? '' : `${placeOf(f.record, line)}: `;
  return `${place}${f.label}: ${f.at}: ${f.message}`;
}

/** A `Report` (schema.ts) that keeps findings about `record`. */
export function findingReporter(label: string, record: SourcedRecord | undefined, errors: Finding[], warnings: Finding[], convert?: Report['convert']): Report {
  return {
    error: (at, message) => errors.push(record === undefined ? { label, at, message } : { record, label, at, message }),
    warn: (at, message) => warnings.push(record === undefined ? { label, at, message } : { record, label, at, message }),
    ...(convert ? { convert } : {}),
  };
}
