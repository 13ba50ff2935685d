/**
 * The seed of a generated (property or differential) test: `process.env[name]` when set, so a
 * failure printed with its seed can be replayed; under CI a fixed seed, so a landing never depends on
 * the draw; otherwise a new one each run, so local runs keep exploring. The caller prints it.
 */
export function testSeed(name: string, fixed: number): number {
  const given = process.env[name];
  if (given !== undefined && given !== '') return Number(given);
  if (process.env.CI) return fixed;
  return Math.floor(Math.random() * 2 ** 31);
}

/** mulberry32: a small seeded generator of numbers in [0, 1), good enough to pick and mutate cases. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32;
  };
}
