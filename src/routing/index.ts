/**
 * The routing door (STYLE §1): host names → targets, custom-domain routes, the endpoint list, geo
 * choice of a location, replica choice inside it, and the live replica table. Everything but the
 * replica table is a pure function over an immutable snapshot; see each module for its failure
 * modes (they answer `undefined`, never throw, on unknown input).
 */
export {
  buildHostIndex,
  nextHostIndex,
  resolveHost,
  parseHostHeader,
  canonicalHostFor,
  gvcAliasHost,
  locationHostFor,
  replicaHostFor,
  internalHostFor,
  internalReplicaHostFor,
  type HostIndex,
  type HostTarget,
  type HostKind,
  type Listener,
  type ParsedHost,
} from './hosts.js';
export { matchDomainRoute, type DomainRouteMatch } from './domain-routes.js';
export { listEndpoints, formatEndpointsText, type Endpoint } from './endpoints.js';
export { chooseLocation, geoCandidates, type GeoCandidate } from './geo.js';
export { pickReplica, type PickOptions } from './balancer.js';
export { ReplicaRegistry, routeTo, whenFirstChecked, type Replica, type HostPort, type WorkloadTraffic } from './replicas.js';
