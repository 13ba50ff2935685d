/**
 * The filters' side of the proxy (DESIGN §5): the contract a filter implements and the request view
 * it reads (./contract.ts), the local replies it answers with (./reply.ts), header mutations and the
 * vendor's header names (./headers.ts), and whether a request body was cut (./body-cut.ts). Below
 * proxy/, which implements it: nothing here imports proxy/ or roles/.
 */
export { hasBody, SharedResources, type ExchangeView, type Filter, type FilterContext, type FilterFactory, type FilterResult } from './contract.js';
export { ERRORS, errorBody, type ErrorCode, type LocalReply } from './reply.js';
export { strippedAtEdge, vendorHeaders, type HeaderAction, type HeaderOp, type VendorHeaders } from './headers.js';
export { BODY_CUT, bodyCut } from './body-cut.js';
