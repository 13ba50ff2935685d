/**
 * Our ext_authz wire format (proto/) against Envoy's own protos (shipped in @grpc/grpc-js-xds):
 * every message and enum we declare exists upstream under the same full name with the same field
 * names, numbers, labels and types; and messages round-trip both ways — what our definitions
 * encode (CheckRequest as the proxy builds it, CheckResponse as a test server would send it),
 * Envoy's decode identically, and vice versa, including fields only Envoy knows (skipped by us).
 */
import t from 'tap';
import type { MethodDefinition, PackageDefinition } from '@grpc/proto-loader';
import { authWire } from '../../src/extauth/proto.js';
import { decodeCheckResponse } from '../../src/extauth/decode.js';
import { envoyAuthDefinition } from '../fixtures/extauth/servers.js';

interface Field { name: string; number: number; label: string; type: string; typeName: string }
interface Descriptor { name: string; field?: Field[]; nestedType?: Descriptor[]; enumType?: { name: string; value: { name: string; number: number }[] }[] }

/** Every message (nested ones too) of a definition: full name → fields. */
function messages(def: PackageDefinition): Map<string, Field[]> {
  const out = new Map<string, Field[]>();
  const walk = (prefix: string, d: Descriptor): void => {
    out.set(prefix, d.field ?? []);
    for (const n of d.nestedType ?? []) walk(`${prefix}.${n.name}`, n);
  };
  for (const [name, entry] of Object.entries(def)) {
    const e = entry as { format?: string; type?: Descriptor };
    if (e.format === 'Protocol Buffer 3 DescriptorProto' && e.type) walk(name, e.type);
  }
  return out;
}

const ours = authWire();
const envoy = envoyAuthDefinition();
const shortType = (f: Field): string => f.typeName.split('.').at(-1) ?? '';

t.test('every message and field we declare is Envoy’s (or googleapis’), same number and type', async (t) => {
  const mine = messages(ours.definition);
  const theirs = messages(envoy);
  t.ok(mine.size >= 15, `${mine.size} messages`);
  for (const [name, fields] of mine) {
    const upstream = theirs.get(name);
    if (!t.ok(upstream, `${name} exists upstream`)) continue;
    for (const f of fields) {
      const u = upstream!.find((x) => x.number === f.number);
      if (!t.ok(u, `${name}.${f.name} = ${f.number} exists upstream`)) continue;
      t.same(
        { name: u!.name, label: u!.label, type: u!.type, typeName: shortType(u!) },
        { name: f.name, label: f.label, type: f.type, typeName: shortType(f) },
        `${name}.${f.name}`,
      );
    }
  }
});

t.test('enums: our values are Envoy’s', async (t) => {
  for (const name of ['envoy.type.v3.StatusCode']) {
    const mine = (ours.definition[name] as { type: { value: { name: string; number: number }[] } }).type.value;
    const theirs = (envoy[name] as { type: { value: { name: string; number: number }[] } }).type.value;
    t.same(mine.map(({ name, number }) => ({ name, number })), theirs.map(({ name, number }) => ({ name, number })), name);
  }
  const hvo = (def: PackageDefinition) =>
    (def['envoy.config.core.v3.HeaderValueOption'] as { type: Descriptor }).type.enumType![0]!.value.map(({ name, number }) => ({ name, number }));
  t.same(hvo(ours.definition), hvo(envoy), 'HeaderAppendAction');
});

const envoyCheck = (envoy['envoy.service.auth.v3.Authorization'] as Record<string, MethodDefinition<object, object>>).Check!;
const ourCheck = ours.check as unknown as MethodDefinition<object, object>;

const request = {
  attributes: {
    source: {
      address: { socket_address: { address: '203.0.113.7', port_value: 51234 } },
      principal: 'spiffe://acme/ns/shop/sa/client',
      certificate: '-----BEGIN%20CERTIFICATE-----%0AMIIB%0A-----END%20CERTIFICATE-----%0A',
    },
    destination: { address: { socket_address: { address: '10.0.0.1', port_value: 8443 } }, principal: 'localhost' },
    request: {
      time: { seconds: 1_700_000_000, nanos: 5 },
      http: {
        id: 'req-1',
        method: 'POST',
        headers: { ':authority': 'api.example', ':path': '/a?b=1', 'x-h': 'é,\uFFFD', 'x-envoy-auth-partial-body': 'true' },
        path: '/a?b=1',
        host: 'api.example',
        scheme: 'https',
        query: '',
        fragment: '',
        size: 20000,
        protocol: 'HTTP/2',
        body: 'héllo',
        raw_body: Buffer.from([0, 1, 255]),
      },
    },
    context_extensions: { k: 'v' },
  },
};

t.test('CheckRequest: ours encodes, Envoy decodes the same', async (t) => {
  const bytes = ourCheck.requestSerialize(request);
  const decoded = envoyCheck.requestDeserialize(bytes) as typeof request & { attributes: Record<string, unknown> };
  t.match(decoded, {
    attributes: {
      source: request.attributes.source,
      destination: request.attributes.destination,
      request: {
        time: { seconds: '1700000000', nanos: 5 },
        http: { ...request.attributes.request.http, size: '20000' },
      },
      context_extensions: { k: 'v' },
    },
  });
  t.same(decoded.attributes.request.http.headers, request.attributes.request.http.headers);
  t.same([...decoded.attributes.request.http.raw_body], [0, 1, 255]);
  t.same(envoyCheck.requestSerialize(request), bytes, 'the same object encodes to the same bytes with Envoy’s protos');
});

t.test('CheckRequest: Envoy encodes (with fields we do not have), ours decodes the same', async (t) => {
  const full = {
    attributes: {
      ...request.attributes,
      metadata_context: { filter_metadata: { x: { fields: { a: { string_value: 'b' } } } } },
      tls_session: { sni: 'api.example' },
      request: { ...request.attributes.request, http: { ...request.attributes.request.http, header_map: { headers: [{ key: 'k', value: 'v' }] } } },
    },
  };
  const decoded = ourCheck.requestDeserialize(envoyCheck.requestSerialize(full)) as typeof request;
  t.match(decoded.attributes.source, request.attributes.source);
  t.match(decoded.attributes.destination, request.attributes.destination);
  t.same(decoded.attributes.request.http.headers, request.attributes.request.http.headers);
  t.equal(decoded.attributes.request.http.body, 'héllo');
  t.equal(String(decoded.attributes.request.http.size), '20000');
  t.notOk('tls_session' in decoded.attributes, 'fields we do not declare are skipped');
});

const okResponse = {
  status: { code: 0, message: '' },
  ok_response: {
    headers: [
      { header: { key: 'x-a', value: '1' }, append: { value: true } },
      { header: { key: 'x-b', value: '', raw_value: Buffer.from('raw') }, append_action: 'OVERWRITE_IF_EXISTS' },
      { header: { key: 'x-c', value: 'c' }, append_action: 'ADD_IF_ABSENT', keep_empty_value: true },
    ],
    headers_to_remove: ['authorization'],
    response_headers_to_add: [{ header: { key: 'x-r', value: 'r' } }],
    query_parameters_to_set: [{ key: 'q', value: '1' }],
    query_parameters_to_remove: ['z'],
  },
};
const deniedResponse = {
  status: { code: 7, message: 'denied' },
  denied_response: { status: { code: 'Unauthorized' }, headers: [{ header: { key: 'www-authenticate', value: 'Bearer' } }], body: 'nope é' },
};

t.test('CheckResponse: Envoy encodes, ours decodes the same (and back)', async (t) => {
  for (const [name, message] of [['ok', okResponse], ['denied', deniedResponse]] as const) {
    const withExtras = { ...message, dynamic_metadata: { fields: { user: { string_value: 'alice' } } } };
    const bytes = envoyCheck.responseSerialize(withExtras);
    const decoded = ourCheck.responseDeserialize(bytes) as Record<string, unknown>;
    t.match(decoded, message, `${name}: decoded by ours`);
    t.same(decodeCheckResponse(bytes), decoded, `${name}: the proxy's own reader gives the same`);
    t.equal(decoded.http_response, name === 'ok' ? 'ok_response' : 'denied_response', 'the oneof name');
    const back = envoyCheck.responseDeserialize(ourCheck.responseSerialize(decoded));
    t.match(back, message, `${name}: ours re-encodes what Envoy decodes the same`);
  }
  const ok = ourCheck.responseDeserialize(envoyCheck.responseSerialize(okResponse)) as typeof okResponse;
  t.same(ok.ok_response.headers[1]!.header.raw_value, Buffer.from('raw'));
  t.same(ok.ok_response.headers[0]!.append, { value: true }, 'BoolValue append');
  t.equal((ok.ok_response.headers[2] as { append: unknown }).append, null, 'append unset: null');
});
