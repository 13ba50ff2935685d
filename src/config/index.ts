/**
 * The configuration layer's door (DESIGN §2): read record files, validate them against the platform
 * spec's rules, compile them into an immutable `Snapshot`, and keep a live `ConfigStore` that reloads
 * on change and keeps its last good snapshot when handed an invalid one. Invalid input never throws
 * from the pipeline functions (they answer `{ok: false, errors}`); `ConfigStore.open` and
 * `buildSnapshot` throw a `ConfigError` carrying every error.
 */
export type * from './model.js';
export type { RawRecord, SourcedRecord, ReadKind } from './records.js';
export type { Link } from './links.js';
export type { ValidationResult } from './validate.js';
export type { ReadResult } from './load.js';
export type { ConfigStoreOptions } from './store.js';
export type { LoadResult, RecordInput } from './snapshot.js';

export { ConfigStore } from './store.js';
export { ConfigError, buildSnapshot, compileRecords, defaultSettings, loadSnapshot } from './snapshot.js';
export { readRecords, parseRecords } from './load.js';
export { validate } from './validate.js';
export { compile, routeRegex } from './compile.js';
export { canonicalHost } from './compile-workload.js';
export { generatedAlias } from './alias.js';
export { parseLink } from './links.js';
export { parseDuration } from './values.js';
