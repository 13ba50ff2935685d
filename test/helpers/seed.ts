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
