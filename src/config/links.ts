/**
 * Links between records, in the platform's path forms: absolute `/org/ORG/gvc/GVC/workload/NAME`,
 * `/org/ORG/location/NAME`, `/org/ORG/gvc/GVC`, and the org-relative `//gvc/GVC/workload/NAME`,
 * `//workload/NAME` (same GVC as the record that holds it), `//location/NAME`, `//gvc/GVC`.
 * `parseLink` answers `undefined` for anything else; the `*Ref` helpers also say which form was
 * expected, for validation messages. Nothing here looks records up.
 */

export interface Link {
  /** Present in the absolute form. */
  readonly org?: string;
  /** The GVC a GVC-scoped record (workload) lives in; absent for `//workload/NAME`. */
  readonly gvc?: string;
  readonly kind: string;
  readonly name: string;
}

/** Kinds that live inside a GVC: their links carry `gvc/GVC/` unless they are `//KIND/NAME`. */
export const GVC_SCOPED: ReadonlySet<string> = new Set(['workload', 'identity', 'volumeset', 'deployment']);

function segmentsOk(parts: readonly string[]): boolean {
  return parts.every((p) => p !== '' && p.trim() === p);
}

/** Parses a link in one of the accepted forms. */
export function parseLink(link: string): Link | undefined {
  let org: string | undefined;
  let rest: string[];
  if (link.startsWith('//')) {
    rest = link.slice(2).split('/');
  } else if (link.startsWith('/org/')) {
    const parts = link.slice(5).split('/');
    org = parts.shift();
    if (org === undefined || org === '') return undefined;
    if (parts.length === 0) return { kind: 'org', name: org };
    rest = parts;
  } else {
    return undefined;
  }
  if (!segmentsOk(rest)) return undefined;
  const withOrg = org === undefined ? {} : { org };
  if (rest.length === 2) {
    const [kind, name] = rest as [string, string];
    // `/org/O/workload/W` names no GVC; only the relative `//workload/W` may leave it out.
    if (GVC_SCOPED.has(kind) && org !== undefined) return undefined;
    return { ...withOrg, kind, name };
  }
  if (rest.length === 4 && rest[0] === 'gvc' && GVC_SCOPED.has(rest[2] as string)) {
    return { ...withOrg, gvc: rest[1] as string, kind: rest[2] as string, name: rest[3] as string };
  }
  return undefined;
}

export const WORKLOAD_LINK_FORMS = '//workload/NAME, //gvc/GVC/workload/NAME or /org/ORG/gvc/GVC/workload/NAME';
export const LOCATION_LINK_FORMS = '//location/NAME or /org/ORG/location/NAME';
export const GVC_LINK_FORMS = '//gvc/NAME or /org/ORG/gvc/NAME';

/** A link of the given kind, or `undefined` when it is malformed or of another kind. */
export function linkOfKind(link: unknown, kind: string): Link | undefined {
  if (typeof link !== 'string') return undefined;
  const parsed = parseLink(link);
  return parsed?.kind === kind ? parsed : undefined;
}

/**
 * A workload reference `{gvc, name}`; a `//workload/NAME` link takes `fromGvc` (the GVC of the record
 * that holds it), and `gvc` is `undefined` when there is none.
 */
export function workloadRef(link: unknown, fromGvc: string | undefined): { gvc?: string; name: string; org?: string } | undefined {
  const parsed = linkOfKind(link, 'workload');
  if (!parsed) return undefined;
  const gvc = parsed.gvc ?? fromGvc;
  return { name: parsed.name, ...(gvc === undefined ? {} : { gvc }), ...(parsed.org === undefined ? {} : { org: parsed.org }) };
}

/** A location given as a plain name or as a location link (`localOptions[].location`, deployments). */
export function locationName(ref: unknown): string | undefined {
  if (typeof ref !== 'string' || ref === '') return undefined;
  if (!ref.includes('/')) return ref;
  return linkOfKind(ref, 'location')?.name;
}

/** A GVC given as a plain name or as a GVC link (a workload's or deployment's `gvc`). */
export function gvcName(ref: unknown): string | undefined {
  if (typeof ref !== 'string' || ref === '') return undefined;
  if (!ref.includes('/')) return ref;
  return linkOfKind(ref, 'gvc')?.name;
}
