/**
 * `-o tf` and `-o crd`: rendered by the platform's servers, as its CLI has them rendered. The
 * endpoint's `GET /discovery` names an exporter (`endpoints.terraform-exporter`,
 * `endpoints.k8s-crd-exporter`), which is asked for the answer's self link with the same credential;
 * a CRD list prints as YAML documents separated by `---`. The exporter is looked up before the
 * command's own request is sent, so an endpoint that renders neither (a local `up`) refuses the
 * command with a clear message before anything is changed (exit 1).
 */
import { ClientError } from './errors.js';
import { toYaml } from './format/index.js';
import { linkOf } from './format/cells.js';
import { HttpFailure, Unreachable, type ApiClient } from './http.js';
import type { Session } from './session.js';

/** What an export reads of the command's context (./context.ts). */
interface ExportContext {
  readonly client: ApiClient;
  readonly session: Session;
}

const SERVICES = { tf: 'terraform-exporter', crd: 'k8s-crd-exporter' } as const;
const WHAT = { tf: 'Terraform', crd: 'Kubernetes CRDs' } as const;

/** The exporter's base URL for `-o tf|crd`, from the endpoint's discovery; refuses when there is none. */
export async function exporterOf(ctx: ExportContext, output: 'tf' | 'crd'): Promise<string> {
  const service = SERVICES[output];
  const refuse = (why: string): ClientError =>
    new ClientError(`-o ${output}: ${ctx.session.endpoint} does not render ${WHAT[output]} (${why}); the platform's API does, through its ${service}. Use -o yaml or -o json here`);
  let discovery: unknown;
  try {
    discovery = (await ctx.client.request('GET', '/discovery')).body;
  } catch (e) {
    if (e instanceof HttpFailure) throw refuse(`GET /discovery answered ${e.answer.status}`);
    if (e instanceof Unreachable) throw e;
    throw e;
  }
  const url = (discovery as { endpoints?: Record<string, unknown> } | null)?.endpoints?.[service];
  if (typeof url !== 'string' || !/^https?:\/\//.test(url)) throw refuse(`its /discovery names no ${service}`);
  return url.replace(/\/$/, '');
}

/** The exporter's rendering of an answer (its self link). */
export async function exported(ctx: ExportContext, body: unknown, output: 'tf' | 'crd'): Promise<string> {
  const base = await exporterOf(ctx, output);
  const self = linkOf(body, 'self');
  if (typeof self !== 'string') throw new ClientError(`-o ${output}: the answer has no self link to export`);
  const answer = (await ctx.client.request('GET', `${base}${self}`)).body;
  if (output === 'tf') return typeof answer === 'string' ? answer : JSON.stringify(answer, undefined, 2);
  const list = answer as { kind?: unknown; items?: unknown } | null;
  if (list?.kind === 'list' && Array.isArray(list.items)) return list.items.map((item) => toYaml(item, ctx.session.color)).join('---\n');
  return toYaml(answer, ctx.session.color);
}
