/**
 * The grantable permissions of each kind, as `GET <collection>/-schema/permissions` answers them
 * (what `cpln KIND permissions` prints): `{kind: 'permissions', targetKind, items: [{name,
 * description}], implied: {PERMISSION: [what it implies]}, links}`, the platform's shape (its CLI
 * reads `items[].name`, `items[].description` and `implied`; @controlplane/schema's `Permissions`).
 * `up` stores policies but enforces none (DESIGN §13): the tables say what a policy may name.
 *
 * Sources: platform-spec.md (Quota: create, edit implies view, manage implies create, edit, manage
 * and view, view); docs.controlplane.com/reference/{workload/security, policy, org, auditctx}
 * (their Permissions tables); the vendor's access-control notes (github.com/controlplane-com/
 * ai-plugin, plugins/cpln/skills/access-control/permissions-matrix.md) for secret (`edit` implies
 * `view` and `reveal`) and identity (`use`). GVC, domain and location have the standard set the same
 * notes give (create, delete, edit, manage, view; `edit` implies `view`); a workload's
 * `configureLoadBalancer` and `exec.stopReplica`, and an org's `exec`, are in the notes but not in the
 * reference tables and are left out. Pure; never throws.
 */
import type { Answer } from './context.js';

export interface PermissionTable {
  /** Each permission with its description and what it implies, in the platform's (alphabetical) order. */
  readonly items: readonly (readonly [name: string, description: string, implies?: readonly string[]])[];
}

/** `manage` implies every permission of the kind, itself included (as the platform lists it). */
function table(rows: readonly (readonly [string, string, (readonly string[])?])[]): PermissionTable {
  const names = rows.map(([n]) => n).sort();
  return { items: rows.map(([name, description, implies]) => [name, description, name === 'manage' ? names : implies] as const) };
}

const standard = (plural: string): PermissionTable => table([
  ['create', `Create new ${plural}`],
  ['delete', `Delete existing ${plural}`],
  ['edit', `Modify existing ${plural}`, ['view']],
  ['manage', 'Full access'],
  ['view', 'Read-only view'],
]);

export const PERMISSIONS = {
  org: table([
    ['edit', 'Modify org', ['view']],
    ['grafanaAdmin', 'Grantees are made Admin in Grafana, otherwise the role \'Viewer\' is assigned'],
    ['manage', 'Full access'],
    ['readLogs', 'Grantees can read logs from all workloads', ['view']],
    ['readMetrics', 'Grantees can access usage and performance metrics'],
    ['readUsage', 'Grantees can access usage and billing metrics'],
    ['view', 'Read-only view: every org member can view their org'],
    ['viewAccessReport', 'Grantees can inspect the granted access report on all resources within the org'],
  ]),
  gvc: standard('GVCs'),
  workload: table([
    ['connect', 'Connect to replica (open an interactive shell)'],
    ['create', 'Create new workloads'],
    ['delete', 'Delete existing workloads'],
    ['edit', 'Modify existing workloads', ['view']],
    ['exec', 'Execute commands', ['exec.runCronWorkload']],
    ['exec.runCronWorkload', 'Force a cron-workload to run'],
    ['manage', 'Full access'],
    ['view', 'Read-only access'],
  ]),
  identity: table([
    ['create', 'Create new identities'],
    ['delete', 'Delete existing identities'],
    ['edit', 'Modify existing identities', ['view']],
    ['manage', 'Full access'],
    ['use', 'Use this identity (assign it to a workload)', ['view']],
    ['view', 'Read-only view'],
  ]),
  secret: table([
    ['create', 'Create new secrets'],
    ['delete', 'Delete existing secrets'],
    ['edit', 'Modify existing secrets', ['reveal', 'view']],
    ['manage', 'Full access'],
    ['reveal', 'Reveal the secret\'s data', ['view']],
    ['use', 'Use this secret (reference it from a workload)', ['view']],
    ['view', 'Read-only view'],
  ]),
  domain: standard('domains'),
  location: standard('locations'),
  policy: standard('policies'),
  auditctx: table([
    ['create', 'Create new contexts'],
    ['edit', 'Modify existing contexts', ['view']],
    ['manage', 'Full access'],
    ['readAudit', 'Read from this context', ['view']],
    ['view', 'Read-only view'],
    ['writeAudit', 'Write to this context', ['view']],
  ]),
  quota: table([
    ['create', 'Create new quotas'],
    ['edit', 'Modify existing quotas', ['view']],
    ['manage', 'Full access'],
    ['view', 'Read-only view'],
  ]),
} as const satisfies Record<string, PermissionTable>;

/** The answer of `GET <collection>/-schema/permissions` for `kind`, at `self`. */
export function permissionsAnswer(kind: string, permissions: PermissionTable, self: string): Answer {
  const implied: Record<string, readonly string[]> = {};
  for (const [name, , implies] of permissions.items) if (implies !== undefined && implies.length > 0) implied[name] = implies;
  return {
    status: 200,
    body: {
      kind: 'permissions',
      targetKind: kind,
      items: permissions.items.map(([name, description]) => ({ name, description })),
      implied,
      links: [{ rel: 'self', href: self }],
    },
  };
}
