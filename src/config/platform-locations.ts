/**
 * The platform's own locations (DESIGN §3): the cloud regions every org has without writing a
 * `location` record, so a GVC applied as the platform's users write it (`//location/aws-us-east-2`)
 * loads as it is. A location record of the same name overrides one of these; catalog.ts adds one to a
 * configuration only when a record links it by name, so a `locationQuery` selects among the location
 * records and the platform locations that records link, never every region the platform runs.
 *
 * The list, with each name's provider and region (the name is `<provider>-<region>`):
 * - docs.controlplane.com/concepts/location: aws-us-east-1, gcp-us-central1, azure-westeurope and
 *   oci-us-ashburn-1 as the built-in locations of an org;
 * - the platform's public repositories: controlplane-com/examples (its manifests' GVCs, and
 *   examples/tailscale/values.yaml's `locationDNS`, one entry per location: aws-us-west-2,
 *   aws-us-east-1, aws-us-east-2, aws-sa-east-1, aws-eu-west-2, aws-eu-central-1, aws-il-central-1,
 *   gcp-us-west1, gcp-us-east1, gcp-us-central1, gcp-me-west1, azure-centralus, azure-eastus2) and
 *   controlplane-com/templates (aws-eu-west-1).
 * The platform can enable other regions on request (docs.controlplane.com/reference/location); a
 * location missing here is one `location` record away.
 */
import type { RawRecord } from './records.js';

export interface PlatformLocation {
  readonly name: string;
  readonly provider: 'aws' | 'gcp' | 'azure' | 'oci';
  readonly region: string;
  /** Where it is, as its provider names the region. */
  readonly description: string;
}

export const PLATFORM_LOCATIONS: readonly PlatformLocation[] = Object.freeze([
  { name: 'aws-us-east-1', provider: 'aws', region: 'us-east-1', description: 'US East (N. Virginia)' },
  { name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2', description: 'US East (Ohio)' },
  { name: 'aws-us-west-2', provider: 'aws', region: 'us-west-2', description: 'US West (Oregon)' },
  { name: 'aws-sa-east-1', provider: 'aws', region: 'sa-east-1', description: 'South America (São Paulo)' },
  { name: 'aws-eu-west-1', provider: 'aws', region: 'eu-west-1', description: 'Europe (Ireland)' },
  { name: 'aws-eu-west-2', provider: 'aws', region: 'eu-west-2', description: 'Europe (London)' },
  { name: 'aws-eu-central-1', provider: 'aws', region: 'eu-central-1', description: 'Europe (Frankfurt)' },
  { name: 'aws-il-central-1', provider: 'aws', region: 'il-central-1', description: 'Israel (Tel Aviv)' },
  { name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1', description: 'South Carolina' },
  { name: 'gcp-us-central1', provider: 'gcp', region: 'us-central1', description: 'Iowa' },
  { name: 'gcp-us-west1', provider: 'gcp', region: 'us-west1', description: 'Oregon' },
  { name: 'gcp-me-west1', provider: 'gcp', region: 'me-west1', description: 'Tel Aviv' },
  { name: 'azure-eastus2', provider: 'azure', region: 'eastus2', description: 'East US 2 (Virginia)' },
  { name: 'azure-centralus', provider: 'azure', region: 'centralus', description: 'Central US (Iowa)' },
  { name: 'azure-westeurope', provider: 'azure', region: 'westeurope', description: 'West Europe (Netherlands)' },
  { name: 'oci-us-ashburn-1', provider: 'oci', region: 'us-ashburn-1', description: 'US East (Ashburn)' },
].map((l) => Object.freeze(l as PlatformLocation)));

export const PLATFORM_LOCATION_NAMES: readonly string[] = Object.freeze(PLATFORM_LOCATIONS.map((l) => l.name));

/** Each platform location as the `location` record the platform would return for it (frozen, made once). */
const RECORDS: ReadonlyMap<string, RawRecord> = new Map(PLATFORM_LOCATIONS.map((l) => [l.name, Object.freeze({
  kind: 'location',
  name: l.name,
  description: l.description,
  origin: 'builtin',
  provider: l.provider,
  region: l.region,
})]));

/** The record of the platform location `name`, or `undefined` when the platform has none of that name. */
export function platformLocationRecord(name: string): RawRecord | undefined {
  return RECORDS.get(name);
}
