/**
 * `svcproxy rest`'s writes and lists against `up` as the control plane (one `up` for the file): put,
 * patch (a file and stdin), create and delete seen in what the API answers next, the same bytes as
 * `cpln rest` for a delete and a paged list (real processes); `--max` following `rel: next` (and the
 * platform CLI's note on stderr), names of a list; `edit` with a scripted $EDITOR: one PATCH of only
 * what changed plus the version read, a refused change reopened with the error on top and the user's
 * text until it is fixed, giving up on an unchanged save, a change made meanwhile (409) keeping the
 * user's text; a reader that stops early (EPIPE) ending the command quietly.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cpln } from '../helpers/cpln.js';
import { BIN, runBin, runClient, startApi } from '../helpers/client.js';

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
  { kind: 'gvc', name: 'shop', description: 'the shop', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
];

const sameId = (s: string): string => s.replace(/("id": |^\s*-? ?id: )"?[0-9a-f-]{36}"?/gm, '$1ID');

t.test('svcproxy rest writes against up', async (t) => {
  const api = await startApi(t, RECORDS);
  const env = { SVCPROXY_API: api.address, HOME: api.dir };
  const at = { env, cwd: api.dir };
  const json = async (p: string): Promise<Record<string, any>> => {
    const r = await runClient(['rest', 'get', p, '-o', 'json'], at);
    if (r.code !== 0) throw new Error(`GET ${p}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, any>;
  };
  const gvcYaml = (name: string, description: string) => `kind: gvc\nname: ${name}\ndescription: ${description}\nspec:\n  staticPlacement:\n    locationLinks: [//location/aws-us-east-2]\n`;

  t.test('put, patch, create, delete: each seen in the next answer', async (t) => {
    const file = path.join(api.dir, 'g1.yaml');
    await writeFile(file, gvcYaml('g1', 'first'));
    const put = await runClient(['rest', 'put', '/org/acme/gvc', '-f', file, '-o', 'names'], at);
    t.equal(put.code, 0, put.stderr);
    t.equal(put.stdout, 'g1\n');
    t.equal((await json('//gvc/g1')).description, 'first');
    await writeFile(file, gvcYaml('g1', 'replaced'));
    t.equal((await runClient(['rest', 'put', '//gvc/g1', '-f', file], at)).code, 0, 'PUT on the item replaces');
    t.equal((await json('//gvc/g1')).description, 'replaced');
    const patched = await runClient(['rest', 'patch', '//gvc/g1', '-f', '-', '-o', 'json'], { ...at, stdin: 'description: patched\ntags:\n  team: web\n' });
    t.equal(patched.code, 0, patched.stderr);
    t.match(JSON.parse(patched.stdout), { description: 'patched', tags: { team: 'web' } }, 'the answer of the PATCH, printed');
    const removed = await runClient(['rest', 'patch', '//gvc/g1', '-f', '-'], { ...at, stdin: '{"tags": {"team": null}}' });
    t.equal(removed.code, 0);
    t.same((await json('//gvc/g1')).tags ?? {}, {}, 'null removes a member');
    const workload = path.join(api.dir, 'w.json');
    await writeFile(workload, JSON.stringify({ kind: 'workload', name: 'api', spec: { type: 'standard', containers: [{ name: 'app', image: 'api:1', ports: [{ number: 8080, protocol: 'http' }] }] } }));
    const created = await runClient(['rest', 'create', '//gvc/g1/workload', '-f', workload, '-o', 'yaml'], at);
    t.equal(created.code, 0, created.stderr);
    t.match(created.stdout, /^kind: workload\nname: api\n/m, 'POST, then the GET of its Location, printed');
    t.match((await runClient(['rest', 'get', '//workload/api', '--gvc', 'g1'], at)).stdout, /\|api +\|/, 'a workload\'s table');
    const deleted = await runClient(['rest', 'delete', '//gvc/g1/workload/api'], at);
    t.equal(deleted.code, 0, deleted.stderr);
    t.equal(deleted.stdout, '\n', 'an empty line, as the platform CLI');
    t.equal((await runClient(['rest', 'get', '//gvc/g1/workload/api'], at)).code, 1, 'gone');
    const invalid = await runClient(['rest', 'patch', '//gvc/g1', '-f', '-'], { ...at, stdin: `description: ${'x'.repeat(300)}\n` });
    t.equal(invalid.code, 1);
    t.match(invalid.stderr, '"code": "invalid_record"');
  });

  t.test('lists: --max follows rel next, names; the same bytes as cpln for a page and a delete', async (t) => {
    for (const n of [1, 2, 3, 4, 5]) {
      const r = await runClient(['rest', 'post', '/org/acme/gvc', '-f', '-'], { ...at, stdin: JSON.stringify({ kind: 'gvc', name: `list-${n}` }) });
      t.equal(r.code, 0, r.stderr);
    }
    const firstPage = await runClient(['rest', 'get', '/org/acme/gvc?limit=2', '-o', 'names'], at);
    t.equal(firstPage.stdout.trim().split('\n').length, 2, 'without --max: the answer as it came');
    t.equal(firstPage.stderr, '');
    const three = await runClient(['rest', 'get', '/org/acme/gvc?limit=2', '--max', '3', '-o', 'json'], at);
    const body = JSON.parse(three.stdout) as { items: { name: string }[]; links: { rel: string }[] };
    t.equal(body.items.length, 3, '--max 3 over pages of 2');
    t.ok(body.links.some((l) => l.rel === 'next'), 'the last page\'s links kept');
    t.equal(three.stderr, 'Note: More records are available. Showing first 3 results. Use --max 0 to fetch all records.\n\n');
    const all = await runClient(['rest', 'get', '//gvc?limit=2', '--max', '0', '-o', 'names'], at);
    t.ok(all.stdout.trim().split('\n').length >= 6, 'every page');
    t.equal(all.stderr, '');
    const home = await mkdtemp(path.join(tmpdir(), 'svcproxy-cpln-'));
    t.teardown(() => rm(home, { recursive: true, force: true }));
    const page = ['rest', 'get', '/org/acme/gvc?limit=2', '-o', 'json', '--endpoint', api.url, '--token', api.key];
    const [theirs, ours] = await Promise.all([cpln(page, { home }), runBin(page, { cwd: home, env: { NO_COLOR: '1' } })]);
    t.equal(ours.stdout, theirs.stdout, 'a page: the same bytes');
    const del = (name: string) => ['rest', 'delete', `/org/acme/gvc/${name}`, '--endpoint', api.url, '--token', api.key];
    const [theirDelete, ourDelete] = await Promise.all([cpln(del('list-4'), { home }), runBin(del('list-5'), { cwd: home })]);
    t.same([ourDelete.code, ourDelete.stdout], [theirDelete.code, theirDelete.stdout], 'a delete: the same bytes');
    const [theirMissing, ourMissing] = await Promise.all([cpln(del('list-4'), { home }), runBin(del('list-4'), { cwd: home })]);
    t.same([ourMissing.code, ourMissing.stdout, sameId(ourMissing.stderr)], [theirMissing.code, theirMissing.stdout, sameId(theirMissing.stderr)], 'deleting what is gone: the same error');
  });

  t.test('edit: one PATCH of what changed, with the version read', async (t) => {
    await runClient(['rest', 'post', '/org/acme/gvc', '-f', '-'], { ...at, stdin: gvcYaml('e1', 'before edit') });
    const before = await json('//gvc/e1');
    const editor = await script(t, 'sed -i "s/^description: before edit$/description: after edit/" "$1"');
    const r = await runClient(['rest', 'edit', '//gvc/e1', '-d', '-o', 'names'], { env: { ...env, EDITOR: editor }, cwd: api.dir });
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'e1\n', 'the PATCH\'s answer, printed');
    const sent = /> PATCH \/org\/acme\/gvc\/e1\n(?:> [^\n]*\n)*\n([\s\S]*?)\n>>>>>>>/.exec(r.stderr)?.[1];
    t.same(JSON.parse(sent ?? 'null'), { description: 'after edit', version: before.version }, 'only the change, and the version read');
    const after = await json('//gvc/e1');
    t.equal(after.description, 'after edit');
    t.ok(after.version > before.version);
  });

  t.test('edit: a refused change reopens the editor with the error on top and the user\'s text', async (t) => {
    await runClient(['rest', 'post', '/org/acme/gvc', '-f', '-'], { ...at, stdin: gvcYaml('e2', 'valid') });
    const dir = await mkdtemp(path.join(tmpdir(), 'svcproxy-edits-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    // First round: a description over 250 characters; second: the text it is shown, kept, then fixed.
    const editor = await script(t, `n=$(ls ${dir} | wc -l); cp "$1" ${dir}/round-$n.yaml
if [ "$n" = 0 ]; then sed -i "s/^description: valid$/description: ${'y'.repeat(300)}/" "$1"; else sed -i "s/^description: y*$/description: fixed/" "$1"; fi`);
    const r = await runClient(['rest', 'edit', '//gvc/e2', '-o', 'names'], { env: { ...env, EDITOR: editor }, cwd: api.dir });
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'e2\n');
    t.same((await readdir(dir)).sort(), ['round-0.yaml', 'round-1.yaml'], 'the editor opened twice');
    const second = await readFile(path.join(dir, 'round-1.yaml'), 'utf8');
    t.match(second, /^# You are about to PATCH \/org\/acme\/gvc\/e2\n[\s\S]*# The API refused the change: 400 invalid_record\n#   [^\n]*\n(#   - [^\n]*description[^\n]*\n)+/, 'the error, with every finding, on top');
    t.match(second, `\ndescription: ${'y'.repeat(300)}\n`, 'the user\'s text, not the resource again');
    t.equal((await json('//gvc/e2')).description, 'fixed');
  });

  t.test('edit: giving up keeps the text; a change made meanwhile is refused, the text kept', async (t) => {
    await runClient(['rest', 'post', '/org/acme/gvc', '-f', '-'], { ...at, stdin: gvcYaml('e3', 'valid') });
    const stubborn = await script(t, `grep -q '^# The API refused' "$1" || sed -i "s/^description: valid$/description: ${'z'.repeat(300)}/" "$1"`);
    const gaveUp = await runClient(['rest', 'edit', '//gvc/e3'], { env: { ...env, EDITOR: stubborn }, cwd: api.dir });
    t.equal(gaveUp.code, 1);
    const kept = /kept in (\S+\.yaml)/.exec(gaveUp.stderr)?.[1];
    t.ok(kept, gaveUp.stderr);
    t.match(await readFile(kept!, 'utf8'), 'z'.repeat(300), 'the user\'s text is in the file named');
    await rm(path.dirname(kept!), { recursive: true, force: true });
    t.equal((await json('//gvc/e3')).description, 'valid', 'nothing applied');
    // While the editor is open, someone else changes the GVC: the edit's PATCH carries the old version.
    const racer = await script(t, `SVCPROXY_API=${api.address} ${process.execPath} ${BIN} rest patch //gvc/e3 -f - <<EOF >/dev/null
description: changed meanwhile
EOF
sed -i "s/^description: valid$/description: mine/" "$1"`);
    const conflict = await runClient(['rest', 'edit', '//gvc/e3'], { env: { ...env, EDITOR: racer }, cwd: api.dir });
    t.equal(conflict.code, 1);
    t.match(conflict.stderr, '"code": "version_conflict"');
    t.match(conflict.stderr, /svcproxy: \/org\/acme\/gvc\/e3 changed since it was read; your text is kept in (\S+)/);
    t.equal((await json('//gvc/e3')).description, 'changed meanwhile', 'the other change stands');
    const file = /kept in (\S+?):/.exec(conflict.stderr)?.[1];
    if (file) await rm(path.dirname(file), { recursive: true, force: true });
  });

  t.test('a reader that stops early: the command ends quietly', async (t) => {
    for (let n = 0; n < 60; n++) await runClient(['rest', 'post', '/org/acme/gvc', '-f', '-'], { ...at, stdin: JSON.stringify({ kind: 'gvc', name: `many-${n}`, description: 'd'.repeat(200) }) });
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'rest', 'get', '/org/acme/gvc', '--max', '0', '-o', 'yaml'], { cwd: api.dir, env: { PATH: process.env.PATH, HOME: api.dir, SVCPROXY_API: api.address } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.stdout.once('data', () => child.stdout.destroy());
      child.once('exit', (code) => resolve({ code, stderr }));
    });
    t.equal(r.code, 0);
    t.equal(r.stderr, '', 'no stack, no message');
  });
});

/** An executable shell script (an $EDITOR), removed at teardown. */
async function script(t: { teardown(fn: () => unknown): void }, body: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'svcproxy-editor-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'edit');
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}
