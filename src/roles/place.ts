/**
 * Where an ingress or a sidecar says it is, against its records (DESIGN §3). `--location` (or
 * `SVC_LOCATION`) must name a location of the configuration when it has any: a mistyped one would
 * route nothing locally and probe every replica as remote. `--org` (or `SVC_ORG`) names the org of
 * the process's identity (`spiffe://ORG/...`) when the records carry no org record, and may not name
 * another than theirs: the mesh would otherwise expect certificates of one org and present another.
 * Checked once the first configuration is loaded, before anything is bound or dialled (a usage
 * error, exit 2); a reload whose org record is another than `--org` is rejected (the store keeps the
 * configuration in force).
 */
import type { Snapshot } from '../config/model.js';

export interface Place {
  readonly location?: string | undefined;
  readonly org?: string | undefined;
}

/** `--org` against the records' org: the disagreement, naming both, or undefined. */
export function orgConflict(org: string | undefined, snapshot: Snapshot): string | undefined {
  const theirs = snapshot.org?.name;
  if (org === undefined || theirs === undefined || org === theirs) return undefined;
  return `--org ${org} is not the configuration's org: its org record is ${theirs}`;
}

/** The first thing wrong with where the process says it is, or undefined. */
export function placeProblem(place: Place, snapshot: Snapshot): string | undefined {
  const { locations } = snapshot;
  if (place.location !== undefined && locations.size > 0 && !locations.has(place.location)) {
    return `--location ${place.location} is not a location of the configuration (known: ${[...locations.keys()].sort().join(', ')})`;
  }
  return orgConflict(place.org, snapshot);
}
