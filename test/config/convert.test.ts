/**
 * The API's conversion of written records (src/config/convert.ts): strings that read as the number
 * or boolean a member takes become that value, by the validator's own shape tables; anything else is
 * left for validation to report, and members that take strings (tags, names, env values) are never
 * touched.
 */
import t from 'tap';
import Joi from 'joi';
import { convertScalars, validateConverted } from '../../src/config/convert.js';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { booleanText, numberText } from '../../src/config/schema.js';
import { prng, testSeed } from '../helpers/seed.js';
import { validate } from '../../src/config/validate.js';

const workload = (defaultOptions: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  kind: 'workload', name: 'w', gvc: 'g', tags: { n: '5', b: 'true' },
  spec: {
    type: 'standard',
    containers: [{ name: 'main', image: 'x', ports: [{ number: '8080', protocol: 'http' }], env: [{ name: 'N', value: '7' }] }],
    defaultOptions,
    ...extra,
  },
});

t.test('strings converted where the member takes a number or a boolean', async (t) => {
  const given = workload({ autoscaling: { minScale: '2', maxScale: ' 3 ', scaleToZeroDelay: '300' }, suspend: 'true', debug: 'FALSE', timeoutSeconds: '1e1' });
  const { record, converted } = convertScalars(given, defaultSettings);
  const spec = record.spec as Record<string, any>;
  t.same(spec.defaultOptions, { autoscaling: { minScale: 2, maxScale: 3, scaleToZeroDelay: 300 }, suspend: true, debug: false, timeoutSeconds: 10 });
  t.equal(spec.containers[0].ports[0].number, 8080);
  t.same(spec.containers[0].env, [{ name: 'N', value: '7' }], 'env values are strings');
  t.same(record.tags, { n: '5', b: 'true' }, 'tag values are kept as written');
  t.equal(converted.length, 7);
  t.equal((given.spec as Record<string, any>).defaultOptions.autoscaling.minScale, '2', 'the input is not changed');
  t.same(validate([{ record, source: 'inline' }], defaultSettings).errors.filter((e) => !e.includes('gvc')), [], 'what is converted validates');
});

t.test('what does not convert is left for validation', async (t) => {
  const given = workload({ autoscaling: { minScale: 'two', maxScale: '2.5' }, suspend: 'yes', timeoutSeconds: '9999' });
  const { record, converted } = convertScalars(given, defaultSettings);
  t.same((record.spec as Record<string, any>).defaultOptions, { autoscaling: { minScale: 'two', maxScale: '2.5' }, suspend: 'yes', timeoutSeconds: '9999' });
  t.same(converted, ['spec.containers[0].ports[0].number']);
  const errors = validate([{ record, source: 'inline' }], defaultSettings).errors;
  for (const want of [/minScale: must be an integer/, /maxScale: must be an integer/, /suspend: must be true or false/, /timeoutSeconds: must be an integer from 1 to 600/]) {
    t.ok(errors.some((e) => want.test(e)), `${String(want)} in ${errors.join('; ')}`);
  }
  const plain = { kind: 'gvc', name: 'g' };
  t.equal(convertScalars(plain, defaultSettings).record, plain, 'nothing to convert: the same object');
});

t.test('strings read as numbers and booleans exactly as Joi converts them (the reference), on generated strings', async (t) => {
  const seed = testSeed('CONVERT_SEED', 417);
  t.comment(`CONVERT_SEED=${seed}`);
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const digits = (max: number): string => Array.from({ length: Math.floor(rand() * max) }, () => pick('0123456789'.split(''))).join('');
  const spaces = (): string => pick(['', '', '', ' ', '  ', '\t', '\n', '\u00a0', '\u2028', '\u3000']);
  const numeral = (): string => {
    const whole = pick([digits(4), digits(17), digits(22), '0', '00', '']);
    const fraction = pick(['', '', '.', `.${digits(4)}`, `.${digits(20)}`, `.${'0'.repeat(Math.floor(rand() * 4))}`]);
    const exponent = pick(['', '', '', `e${digits(3)}`, `E-${digits(3)}`, `e+${digits(2)}`, 'e']);
    return `${spaces()}${pick(['', '', '+', '-', '+-'])}${whole}${fraction}${exponent}${spaces()}`;
  };
  const noise = (text: string): string => {
    // A mutation: a character replaced, inserted or removed.
    const i = Math.floor(rand() * (text.length + 1));
    const c = pick(['x', '_', ',', '.', 'e', '-', '0x', '٣', ' ', 'Infinity', 'NaN']);
    return pick([text.slice(0, i) + c + text.slice(i + 1), text.slice(0, i) + c + text.slice(i), text.slice(0, i) + text.slice(i + 1)]);
  };
  const joiNumber = Joi.number();
  let checked = 0;
  for (let i = 0; i < 20_000; i++) {
    const text = rand() < 0.7 ? numeral() : noise(numeral());
    const want = joiNumber.validate(text);
    const got = numberText(text);
    const expected = want.error === undefined ? (want.value as number) : undefined;
    if (!Object.is(got, expected)) {
      t.fail(`numberText(${JSON.stringify(text)}): ${String(got)}, Joi: ${want.error ? want.error.details[0]!.type : String(want.value)}`);
      break;
    }
    checked++;
  }
  t.equal(checked, 20_000, 'every generated string as Joi reads it');
  const joiBoolean = Joi.boolean();
  for (const base of ['true', 'false', 'yes', 'no', '1', '0', 'on']) {
    for (const text of [base, base.toUpperCase(), base[0]!.toUpperCase() + base.slice(1), ` ${base}`, `${base} `, `${base}\n`]) {
      const want = joiBoolean.validate(text);
      t.equal(booleanText(text), want.error === undefined ? want.value : undefined, JSON.stringify(text));
    }
  }
});

t.test('a file\'s strings are read as the API reads them: validate, up and the API agree', async (t) => {
  const file = { record: workload({ autoscaling: { minScale: '2', maxScale: '3' }, timeoutSeconds: '5', suspend: 'false' }), source: 'records.yaml', line: 1 };
  const gvc = { record: { kind: 'gvc', name: 'g', spec: {} }, source: 'records.yaml', line: 20 };
  const { records, result } = validateConverted([gvc, file], defaultSettings);
  t.same(result.errors, []);
  t.equal(records[0], gvc, 'a record without strings to convert is the same object');
  t.match((records[1]!.record.spec as Record<string, any>).defaultOptions, { autoscaling: { minScale: 2, maxScale: 3 }, timeoutSeconds: 5, suspend: false });
  const snapshot = buildSnapshot([gvc, file]);
  t.equal(snapshot.workloads.get('g/w')!.defaultOptions.minScale, 2, 'compiled from the converted values');
  t.match((snapshot.records.find((r) => r.kind === 'workload')!.spec as Record<string, any>).defaultOptions.timeoutSeconds, 5, 'the snapshot holds them converted (the API shows numbers)');
  const refused = validateConverted([gvc, { ...file, record: workload({ timeoutSeconds: 'five' }) }], defaultSettings);
  t.match(refused.result.errors, [/timeoutSeconds: must be an integer from 1 to 600/], 'what does not convert is still an error');
});
