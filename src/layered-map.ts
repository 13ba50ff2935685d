/**
 * A map made from another without copying it, for the tables a configuration change makes again
 * (routes.ts, hosts.ts): a base map that nobody changes any more, and the entries set or deleted
 * since, in a map of their own. `next` gives the map of the next generation: the same base and a
 * copy of the entries changed, so one workload's change costs the entries changed so far rather
 * than a copy of 10,000; once those reach a sixteenth of the base, they are folded into a new base
 * (a copy, as often as that).
 *
 * Each generation is a map of its own that its maker fills and then only reads: a request that
 * started on a table keeps reading what that table held, a new request reads the newest. Values are
 * never `undefined`. It iterates in a `Map`'s order: a key set again keeps its place, a key deleted
 * and set again, or new, comes after the others in the order they were set (lists made from it,
 * such as the platform API's pages, read as those of a `Map` filled alike).
 */
const GONE: unique symbol = Symbol('gone');

/** Folded into a new base past this many changed entries (and a sixteenth of the base). */
const MIN_FOLD = 64;

export class LayeredMap<K, V> implements ReadonlyMap<K, V> {
  private constructor(
    private readonly base: ReadonlyMap<K, V>,
    /** Entries set or deleted since `base`, in the order a `Map` would have them among the appended. */
    private readonly changed: Map<K, V | typeof GONE>,
    /** Keys of `base` deleted and set again: they come after the others, at their place in `changed`. */
    private readonly moved: Set<K>,
    private count: number,
  ) {}

  /**
   * Every entry in a plain `Map`, made at the first walk of a generation with changes (walks of
   * 10,000 entries through the layers are several times slower than a `Map`'s; a snapshot's maps
   * are walked by several readers) and the next generation's base (a fold that costs nothing).
   */
  private flat: Map<K, V> | undefined;

  /** A map over `base`, which nobody may change any more. */
  static over<K, V>(base: ReadonlyMap<K, V>): LayeredMap<K, V> {
    return base instanceof LayeredMap ? (base as LayeredMap<K, V>) : new LayeredMap(base, new Map(), new Set(), base.size);
  }

  /** The map of the next generation, to fill: `map`'s entries, `map` itself left as it is. */
  static next<K, V>(map: ReadonlyMap<K, V>): LayeredMap<K, V> {
    const from = LayeredMap.over(map);
    if (from.flat !== undefined) return new LayeredMap(from.flat, new Map(), new Set(), from.count);
    if (from.changed.size > MIN_FOLD && from.changed.size * 16 > from.base.size) return new LayeredMap(new Map(from), new Map(), new Set(), from.count);
    return new LayeredMap(from.base, new Map(from.changed), new Set(from.moved), from.count);
  }

  get size(): number {
    return this.count;
  }

  get(key: K): V | undefined {
    if (this.changed.size !== 0) {
      const v = this.changed.get(key);
      if (v !== undefined) return v === GONE ? undefined : v;
    }
    return this.base.get(key);
  }

  has(key: K): boolean {
    return this.get(key) !== undefined;
  }

  set(key: K, value: V): this {
    this.flat = undefined;
    if (!this.has(key)) {
      this.count++;
      // Deleted from the base and set again: after the others, as a `Map` puts it.
      if (this.changed.get(key) === GONE) {
        this.changed.delete(key);
        this.moved.add(key);
      }
    }
    this.changed.set(key, value);
    return this;
  }

  delete(key: K): boolean {
    if (!this.has(key)) return false;
    this.flat = undefined;
    this.count--;
    if (this.base.has(key)) this.changed.set(key, GONE);
    else this.changed.delete(key);
    return true;
  }

  entries(): MapIterator<[K, V]> {
    if (this.changed.size === 0) return this.base.entries() as MapIterator<[K, V]>;
    this.flat ??= new Map(this.layered());
    return this.flat.entries();
  }

  /** The entries through the layers, in a `Map`'s order. */
  private *layered(): Generator<[K, V]> {
    const { changed, moved } = this;
    for (const entry of this.base) {
      const v = changed.size === 0 ? undefined : changed.get(entry[0]);
      if (v === undefined) yield entry;
      else if (v !== GONE && !moved.has(entry[0])) yield [entry[0], v];
    }
    for (const [key, v] of changed) if (v !== GONE && (moved.has(key) || !this.base.has(key))) yield [key, v];
  }

  keys(): MapIterator<K> {
    if (this.changed.size === 0) return this.base.keys() as MapIterator<K>;
    this.flat ??= new Map(this.layered());
    return this.flat.keys();
  }

  values(): MapIterator<V> {
    if (this.changed.size === 0) return this.base.values() as MapIterator<V>;
    this.flat ??= new Map(this.layered());
    return this.flat.values();
  }

  forEach(fn: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) fn.call(thisArg, value, key, this);
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }
}
