/**
 * The observers' side of the proxy: the hook points a data plane calls (`RequestTelemetry`) and the
 * read-only view of a request they get (`ExchangeInfo`), ./contract.ts. Below proxy/, which
 * implements it: nothing here imports proxy/ or roles/.
 */
export type { AttemptEnd, ExchangeInfo, RequestTelemetry, Role, TunnelInfo } from './contract.js';
