/**
 * External authorization (Envoy ext_authz v3, gRPC and HTTP modes) for workloads tagged
 * `svc/externalAuthAddress`: the sidecar filter factory and its compiled configuration.
 */
export { extAuthFactory, type ExtAuthOptions } from './filter.js';
export { compileExtAuthTags, type ExtAuthConfig } from './tags.js';
