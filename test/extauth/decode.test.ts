/**
 * The CheckResponse reader (src/extauth/decode.ts) against proto-loader's deserializer of the same
 * protos: allow and deny answers with every field the proxy reads (header options with `append`,
 * each `append_action`, raw values, empty values kept; removals; response headers; query
 * parameters; denial status, headers and body), defaults, an unnamed enum number, unknown fields of
 * every wire type skipped, non-ASCII text; malformed bytes refused; the status-code table against
 * the proto's enum; and the path of `Check`.
 */
import t from 'tap';
import { ProtoError } from '../../src/grpc/proto-reader.js';
import { ProtoWriter } from '../../src/grpc/proto-writer.js';
import { authWire, type CheckResponseObject } from '../../src/extauth/proto.js';
import { CHECK_PATH, decodeCheckResponse, STATUS_CODES } from '../../src/extauth/decode.js';

const method = authWire().check;
/** proto-loader's encoder, fed partial messages (it fills in the defaults). */
const serialize = (message: object): Buffer => method.responseSerialize(message as CheckResponseObject);

t.test('answers decode to what proto-loader gives', async (t) => {
  const responses: [string, Record<string, unknown>][] = [
    ['empty (allowed by default status)', {}],
    ['allowed, empty ok_response (the usual answer)', { status: { code: 0 }, ok_response: {} }],
    ['allowed with every mutation', {
      status: { code: 0, message: 'fine' },
      ok_response: {
        headers: [
          { header: { key: 'x-user', value: 'ålice' }, append: { value: true } },
          { header: { key: 'x-raw', raw_value: Buffer.from([0x61, 0xff]) }, append_action: 'OVERWRITE_IF_EXISTS' },
          { header: { key: 'x-empty', value: '' }, append_action: 'ADD_IF_ABSENT', keep_empty_value: true },
          { header: { key: 'x-set', value: 's' }, append: { value: false }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
          { append_action: 'APPEND_IF_EXISTS_OR_ADD' },
        ],
        headers_to_remove: ['authorization', 'cookie'],
        response_headers_to_add: [{ header: { key: 'x-r', value: 'r' } }, { header: { key: 'x-r2', value: '2' }, append: { value: true } }],
        query_parameters_to_set: [{ key: 'q', value: '1' }, { key: 'e', value: '' }],
        query_parameters_to_remove: ['z', ''],
      },
    }],
    ['denied with status, headers, body', {
      status: { code: 7, message: 'denied' },
      denied_response: { status: { code: 'Unauthorized' }, headers: [{ header: { key: 'www-authenticate', value: 'Bearer' } }], body: 'nope é' },
    }],
    ['denied, status Empty and no body', { status: { code: 16 }, denied_response: { status: {} } }],
    ['denied without denied_response', { status: { code: 7 } }],
    ['a negative status code', { status: { code: -3 } }],
  ];
  for (const [name, response] of responses) {
    const bytes = serialize(response);
    t.same(decodeCheckResponse(bytes), method.responseDeserialize(bytes), name);
  }
});

t.test('fields of newer servers are skipped; enum numbers the proto does not name are kept', async (t) => {
  const w = new ProtoWriter(256);
  const status = w.begin(1);
  w.uint(1, 7);
  const detail = w.begin(3); // google.rpc.Status.details (Any), not in our proto
  w.string(1, 'type.googleapis.com/x');
  w.end(detail);
  w.end(status);
  const denied = w.begin(2);
  const httpStatus = w.begin(1);
  w.uint(1, 299); // not a StatusCode name
  w.end(httpStatus);
  const option = w.begin(2);
  const header = w.begin(1);
  w.string(1, 'k');
  w.string(2, 'v');
  w.fixed32(9, 1);
  w.end(header);
  w.uint(3, 9); // an append action the proto does not name
  w.double(7, 0.5);
  w.end(option);
  w.string(3, 'body');
  w.uint(12, 1);
  w.end(denied);
  const metadata = w.begin(4); // CheckResponse.dynamic_metadata
  w.string(1, 'x');
  w.end(metadata);
  w.uint(15, 3);
  const bytes = Buffer.from(w.view());
  const decoded = decodeCheckResponse(bytes);
  t.same(decoded, method.responseDeserialize(bytes));
  t.equal(decoded.denied_response?.status?.code, 299);
  t.equal(decoded.denied_response?.headers[0]?.append_action, 9);
});

t.test('a oneof sent twice: the last member on the wire is the answer', async (t) => {
  const allow = serialize({ status: { code: 0 }, ok_response: { headers_to_remove: ['a'] } });
  const deny = serialize({ status: { code: 7 }, denied_response: { body: 'no' } });
  const denyThenAllow = decodeCheckResponse(Buffer.concat([deny, allow]));
  t.equal(denyThenAllow.http_response, 'ok_response');
  t.notOk('denied_response' in denyThenAllow);
  t.same(denyThenAllow.status, { code: 0, message: '' }, 'a message field sent twice: the last one (as proto-loader)');
  const allowThenDeny = decodeCheckResponse(Buffer.concat([allow, deny]));
  t.equal(allowThenDeny.http_response, 'denied_response');
  t.notOk('ok_response' in allowThenDeny);
  t.equal(allowThenDeny.denied_response?.body, 'no');
});

t.test('malformed answers are refused', async (t) => {
  const good = serialize({ status: { code: 7 }, denied_response: { body: 'denied' } });
  t.throws(() => decodeCheckResponse(good.subarray(0, good.length - 1)), ProtoError, 'cut short');
  t.throws(() => decodeCheckResponse(Buffer.from([0x0b])), ProtoError, 'wire type 3');
  t.throws(() => decodeCheckResponse(Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])), ProtoError, 'a varint over ten bytes');
});

t.test("the status-code table is the proto's enum; the path is Check's", async (t) => {
  t.same([...STATUS_CODES].sort(), [...authWire().statusCodes].sort());
  t.equal(CHECK_PATH, method.path);
});
