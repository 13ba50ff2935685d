/**
 * `envoy.service.auth.v3.CheckResponse` read straight from the wire, for the answer every request
 * with external authorization waits for. The result is the object proto-loader's deserializer gives
 * with the project's LOADER_OPTIONS (snake_case names, enum names, defaults, the oneof's name),
 * field for field (test/extauth/decode.test.ts compares the two), at a fraction of its cost and
 * without loading the protos. Unknown fields are skipped; malformed bytes throw `ProtoError`.
 */
import {
  DELIMITED_1, DELIMITED_2, DELIMITED_3, DELIMITED_5, DELIMITED_6, DELIMITED_7, DELIMITED_8, VARINT_1, VARINT_3, VARINT_4,
  enumName, ProtoReader, readHeaderValue, readKeyValue,
} from '../grpc/proto-reader.js';
import type { CheckResponseObject, HeaderValueOptionObject } from './proto.js';

/** `Check`'s path (package, service and method names of external_auth.proto). */
export const CHECK_PATH = '/envoy.service.auth.v3.Authorization/Check';

/** envoy.type.v3.StatusCode: its names and numbers (each an HTTP status, but `Empty`). Unnamed numbers stay numbers, as proto-loader leaves them. */
const STATUS_CODE_TABLE =
  'Empty=0 Continue=100 OK=200 Created=201 Accepted=202 NonAuthoritativeInformation=203 NoContent=204 ResetContent=205 ' +
  'PartialContent=206 MultiStatus=207 AlreadyReported=208 IMUsed=226 MultipleChoices=300 MovedPermanently=301 Found=302 ' +
  'SeeOther=303 NotModified=304 UseProxy=305 TemporaryRedirect=307 PermanentRedirect=308 BadRequest=400 Unauthorized=401 ' +
  'PaymentRequired=402 Forbidden=403 NotFound=404 MethodNotAllowed=405 NotAcceptable=406 ProxyAuthenticationRequired=407 ' +
  'RequestTimeout=408 Conflict=409 Gone=410 LengthRequired=411 PreconditionFailed=412 PayloadTooLarge=413 URITooLong=414 ' +
  'UnsupportedMediaType=415 RangeNotSatisfiable=416 ExpectationFailed=417 MisdirectedRequest=421 UnprocessableEntity=422 ' +
  'Locked=423 FailedDependency=424 UpgradeRequired=426 PreconditionRequired=428 TooManyRequests=429 ' +
  'RequestHeaderFieldsTooLarge=431 InternalServerError=500 NotImplemented=501 BadGateway=502 ServiceUnavailable=503 ' +
  'GatewayTimeout=504 HTTPVersionNotSupported=505 VariantAlsoNegotiates=506 InsufficientStorage=507 LoopDetected=508 ' +
  'NotExtended=510 NetworkAuthenticationRequired=511';

/** `envoy.type.v3.StatusCode` name → number. */
export const STATUS_CODES: ReadonlyMap<string, number> = new Map(
  STATUS_CODE_TABLE.split(' ').map((entry) => {
    const [name, number] = entry.split('=') as [string, string];
    return [name, Number(number)];
  }),
);
const STATUS_NAMES = new Map([...STATUS_CODES].map(([name, number]) => [number, name]));

/** HeaderAppendAction's names by number. */
const APPEND_ACTIONS = ['APPEND_IF_EXISTS_OR_ADD', 'ADD_IF_ABSENT', 'OVERWRITE_IF_EXISTS_OR_ADD', 'OVERWRITE_IF_EXISTS'];

/** HeaderValueOption { header 1, append 2 (BoolValue { value 1 }), append_action 3, keep_empty_value 4 } */
function headerValueOption(r: ProtoReader): HeaderValueOptionObject {
  const o: HeaderValueOptionObject = { header: null, append: null, append_action: 'APPEND_IF_EXISTS_OR_ADD', keep_empty_value: false };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) o.header = readHeaderValue(r.message());
    else if (k === DELIMITED_2) {
      const b = r.message();
      const append = { value: false };
      while (!b.done) {
        const t = b.key();
        if (t === VARINT_1) append.value = b.bool();
        else b.skip(t);
      }
      o.append = append;
    } else if (k === VARINT_3) o.append_action = enumName(APPEND_ACTIONS, r.int32());
    else if (k === VARINT_4) o.keep_empty_value = r.bool();
    else r.skip(k);
  }
  return o;
}

type Denied = NonNullable<CheckResponseObject['denied_response']>;
type Ok = NonNullable<CheckResponseObject['ok_response']>;

/** DeniedHttpResponse { status 1 (HttpStatus { code 1 }), headers 2, body 3 } */
function deniedResponse(r: ProtoReader): Denied {
  const d: Denied = { status: null, headers: [], body: '' };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) {
      const s = r.message();
      const status: { code: string | number } = { code: 'Empty' };
      while (!s.done) {
        const t = s.key();
        if (t === VARINT_1) {
          const n = s.int32();
          status.code = STATUS_NAMES.get(n) ?? n;
        } else s.skip(t);
      }
      d.status = status;
    } else if (k === DELIMITED_2) d.headers.push(headerValueOption(r.message()));
    else if (k === DELIMITED_3) d.body = r.string();
    else r.skip(k);
  }
  return d;
}

/** OkHttpResponse { headers 2, headers_to_remove 5, response_headers_to_add 6, query_parameters_to_set 7, query_parameters_to_remove 8 } */
function okResponse(r: ProtoReader): Ok {
  const o: Ok = { headers: [], headers_to_remove: [], response_headers_to_add: [], query_parameters_to_set: [], query_parameters_to_remove: [] };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_2) o.headers.push(headerValueOption(r.message()));
    else if (k === DELIMITED_5) o.headers_to_remove.push(r.string());
    else if (k === DELIMITED_6) o.response_headers_to_add.push(headerValueOption(r.message()));
    else if (k === DELIMITED_7) o.query_parameters_to_set.push(readKeyValue(r.message()));
    else if (k === DELIMITED_8) o.query_parameters_to_remove.push(r.string());
    else r.skip(k);
  }
  return o;
}

/** CheckResponse { status 1 (google.rpc.Status { code 1, message 2 }), oneof http_response { denied_response 2, ok_response 3 } } */
export function decodeCheckResponse(bytes: Uint8Array): CheckResponseObject {
  const r = new ProtoReader(bytes);
  const res: CheckResponseObject = { status: null };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) {
      const s = r.message();
      const status = { code: 0, message: '' };
      while (!s.done) {
        const t = s.key();
        if (t === VARINT_1) status.code = s.int32();
        else if (t === DELIMITED_2) status.message = s.string();
        else s.skip(t);
      }
      res.status = status;
    } else if (k === DELIMITED_2) {
      // A oneof: the last member on the wire is the one set (protobuf's rule), the other one goes.
      delete res.ok_response;
      res.denied_response = deniedResponse(r.message());
      res.http_response = 'denied_response';
    } else if (k === DELIMITED_3) {
      delete res.denied_response;
      res.ok_response = okResponse(r.message());
      res.http_response = 'ok_response';
    } else r.skip(k);
  }
  return res;
}
