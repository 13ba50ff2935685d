/**
 * `svcproxy explain --config PATH... URL [-H 'name: value']... [-X METHOD] [--from IP]
 * [--location NAME] [-o text|json]` (DESIGN §11): how the data plane would treat one request, sent
 * nowhere. Exit 0 when it would be forwarded to a replica, 1 when the proxy would refuse it (the
 * verdict says which answer and why) or the configuration is invalid (validate's error lines, with
 * file and line), 2 for a usage error.
 */
import { loadSnapshot } from '../config/index.js';
import type { Settings } from '../config/model.js';
import { validateReport } from '../config/validate-report.js';
import { UsageError, type Flags } from '../flags.js';
import { explain } from './explain.js';
import { parseExplainRequest } from './request.js';
import { formatText } from './text.js';

export { explain, type Explanation, type ExplainOptions, type Verdict } from './explain.js';
export { parseExplainRequest, type ExplainRequest } from './request.js';
export { formatText } from './text.js';

export async function runExplain(flags: Flags, positionals: readonly string[], settings: Settings): Promise<number> {
  if (positionals.length > 1) throw new UsageError(`explain takes one URL, not ${positionals.length} (${positionals.map((p) => JSON.stringify(p)).join(' ')})`);
  const format = flags.output ?? 'text';
  if (format !== 'text' && format !== 'json') throw new UsageError(`--output must be text or json, not ${JSON.stringify(format)}`);
  const request = parseExplainRequest({
    url: positionals[0],
    ...(flags.header ? { header: flags.header } : {}),
    ...(flags.method !== undefined ? { method: flags.method } : {}),
    ...(flags.from !== undefined ? { from: flags.from } : {}),
  });
  const paths = flags.config ?? [];
  const loaded = await loadSnapshot(paths, settings, 1);
  if (!loaded.ok) {
    // The lines validate prints, with each error's file and line.
    const report = await validateReport(paths, settings);
    for (const line of report.stderr) process.stderr.write(`${line}\n`);
    if (report.exitCode === 0) for (const line of loaded.errors) process.stderr.write(`${line}\n`);
    return 1;
  }
  const snapshot = loaded.snapshot;
  if (flags.location !== undefined && !snapshot.locations.has(flags.location)) {
    throw new UsageError(`--location ${flags.location} is not a location of the configuration (known: ${[...snapshot.locations.keys()].sort().join(', ')})`);
  }
  const explanation = await explain(snapshot, request, flags.location !== undefined ? { location: flags.location } : {});
  process.stdout.write(format === 'json' ? `${JSON.stringify(explanation, null, 2)}\n` : formatText(explanation));
  return explanation.verdict.routes ? 0 : 1;
}
