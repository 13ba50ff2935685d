/**
 * The API's conversion of written records (src/config/convert.ts): strings that read as the number
 * or boolean a member takes become that value, by the validator's own shape tables; anything else is
 * left for validation to report, and members that take strings (tags, names, env values) are never
 * touched.
 */
import t from 'tap';
import { convertScalars } from '../../src/config/convert.js';
import { defaultSettings } from '../../src/config/index.js';
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
