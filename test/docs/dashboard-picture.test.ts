/**
 * The dashboard's picture in the docs is made by scripts/dashboard-picture.ts from a realistic run,
 * not a test's screenshot (test/admin's shows its markup-injection probe): docs/dashboard.png carries
 * the script's `Software` text and the run's `Description`, README.md and docs/debugging.md show it
 * and say how to make it again; and the script itself works: run here for a few seconds into a
 * temporary file, `up` with the tour's records and three more workloads answers the load (checkout
 * failing some requests), and the page it photographs shows every workload with no configuration
 * error.
 */
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PICTURE_SOFTWARE, makePicture, textOf, withText } from '../../scripts/dashboard-picture.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKLOADS = ['echo', 'api', 'web', 'checkout'];

t.test('withText and textOf: tEXt chunks a PNG reader finds', async (t) => {
  const png = readFileSync(path.join(ROOT, 'docs/dashboard.png'));
  const tagged = withText(png, { Title: 'a', Comment: 'b c' });
  t.match(textOf(tagged), { Title: 'a', Comment: 'b c' });
  t.same(tagged.subarray(0, 8), png.subarray(0, 8), 'the signature unchanged');
  t.equal(tagged.length, png.length + 2 * 12 + 'Title'.length + 2 + 'Comment'.length + 4, 'two chunks added, nothing else');
  t.throws(() => withText(Buffer.from('not a png at all, not at all'), { a: 'b' }), /not a PNG/);
});

t.test('docs/dashboard.png is the script\'s picture, shown in the docs with how to remake it', async (t) => {
  const png = readFileSync(path.join(ROOT, 'docs/dashboard.png'));
  const text = textOf(png);
  t.equal(text.Software, PICTURE_SOFTWARE, 'made by scripts/dashboard-picture.ts (a test\'s screenshot carries no such text)');
  for (const w of WORKLOADS) t.match(text.Description, new RegExp(`\\b${w}\\b`), `the run had ${w}`);
  t.equal(png.readUInt32BE(16), 1360, '1360 pixels wide');
  for (const doc of ['README.md', 'docs/debugging.md']) {
    const body = readFileSync(path.join(ROOT, doc), 'utf8');
    t.match(body, /!\[[^\]]*\]\((docs\/)?dashboard\.png\)/, `${doc} shows the picture`);
    t.match(body, /scripts\/dashboard-picture\.ts/, `${doc} names the script that makes it`);
  }
});

const missing = !existsSync('/usr/bin/chromium') ? 'chromium is not installed (scripts/test-deps.sh)' : !existsSync(path.join(ROOT, 'dist/cli.js')) ? 'dist/ is not built (npm run build)' : false;

t.test('the script makes a picture of a realistic run', { skip: missing }, async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-picture-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'dashboard.png');
  const run = await makePicture({ seconds: 3, out, log: (line) => t.comment(line) });
  for (const w of WORKLOADS) {
    t.ok((run.answers.get(w)?.get(200) ?? 0) > 0, `${w}: answered 200s`);
    t.match(run.pageText, new RegExp(`^${w}\\b`, 'm'), `${w}: on the page`);
  }
  const checkout = run.answers.get('checkout')!;
  t.ok((checkout.get(503) ?? 0) + (checkout.get(504) ?? 0) > 0, `checkout: failed some (${[...checkout].map(([s, n]) => `${s}: ${n}`).join(', ')})`);
  t.match(run.pageText, /GVC shop/);
  t.notMatch(run.pageText, /Last configuration error/, 'no configuration error on the page');
  t.equal(textOf(readFileSync(out)).Software, PICTURE_SOFTWARE, 'the picture carries the script\'s text');
});
