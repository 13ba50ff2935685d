/** Certificate identity helpers of the AttributeContext, and the check's header view. */
import t from 'tap';
import { Readable } from 'node:stream';
import { checkView, buildCheckRequest, parseSubjectAltName, principalOf, rfc2253, urlEncodedPem } from '../../src/extauth/attributes.js';
import type { ExchangeView } from '../../src/filter/index.js';

t.test('principal: URI SAN, then DNS SAN, then the subject', async (t) => {
  t.equal(principalOf({ subjectAltName: 'DNS:a.example, URI:spiffe://acme/sa/x', subject: 'CN=x' }), 'spiffe://acme/sa/x');
  t.equal(principalOf({ subjectAltName: 'DNS:a.example, DNS:b.example', subject: 'CN=x' }), 'a.example');
  t.equal(principalOf({ subjectAltName: undefined, subject: 'C=US\nO=Acme, Inc\nCN=client' } as never), 'CN=client,O=Acme\\, Inc,C=US');
  t.same(parseSubjectAltName('DNS:a, IP Address:127.0.0.1, URI:"spiffe://x/a,b"'), [
    { type: 'DNS', value: 'a' },
    { type: 'IP Address', value: '127.0.0.1' },
    { type: 'URI', value: 'spiffe://x/a,b' },
  ]);
  t.equal(rfc2253('O=a\nCN=b'), 'CN=b,O=a');
});

t.test('URL-encoded PEM as Envoy encodes it', async (t) => {
  const pem = '-----BEGIN CERTIFICATE-----\nMIIB+/a=\n-----END CERTIFICATE-----\n';
  t.equal(urlEncodedPem({ toString: () => pem }), '-----BEGIN%20CERTIFICATE-----%0AMIIB%2B%2Fa%3D%0A-----END%20CERTIFICATE-----%0A');
});

function fakeExchange(over: Partial<ExchangeView> & { rawHeaders: string[]; headers?: Record<string, string> }): ExchangeView {
  const req = Object.assign(Readable.from([]), {
    rawHeaders: over.rawHeaders,
    headers: over.headers ?? {},
    method: 'POST',
    httpVersion: '1.1',
    socket: { remoteAddress: '10.0.0.2', remotePort: 5555, localAddress: '10.0.0.1', localPort: 8080 },
  });
  return {
    req,
    host: 'api.example',
    path: '/p',
    query: '?q',
    pathWithQuery: '/p?q',
    requestId: 'rid',
    peer: '10.0.0.2',
    clientAddress: '203.0.113.1',
    tls: false,
    listenerKind: 'external',
    ...over,
  } as unknown as ExchangeView;
}

t.test('the header view: edge vs sidecar', async (t) => {
  const cookies = checkView(fakeExchange({ rawHeaders: ['cookie', 'a=1', 'cookie', 'b=2', 'x-l', '1', 'X-L', '2'] }), []);
  t.equal(cookies.headers.cookie, 'a=1; b=2', 'split cookies rejoined with "; "');
  t.equal(cookies.headers['x-l'], '1,2', 'other repeated headers with ","');
  const raw = ['Host', 'api.example', 'X-Forwarded-Proto', 'https', 'X-Forwarded-For', '203.0.113.1', 'X-Envoy-Foo', '1', 'X-Svc-Bar', '2', 'Connection', 'keep-alive', 'TE', 'gzip', 'Keep-Alive', 'x', 'Content-Length', '3'];
  const edge = checkView(fakeExchange({ rawHeaders: raw }), ['x-envoy-', 'x-svc-']);
  t.equal(edge.scheme, 'http', 'at the edge the connection decides');
  t.same(edge.headers, {
    'x-forwarded-proto': 'http',
    'x-forwarded-for': '203.0.113.1, 10.0.0.2',
    'content-length': '3',
    ':authority': 'api.example',
    ':method': 'POST',
    ':path': '/p?q',
    ':scheme': 'http',
    'x-request-id': 'rid',
  });
  const sidecar = checkView(fakeExchange({ rawHeaders: raw, listenerKind: 'sidecar' }), ['x-envoy-', 'x-svc-']);
  t.equal(sidecar.scheme, 'https', 'behind the ingress the forwarded proto is trusted');
  t.equal(sidecar.headers['x-envoy-foo'], '1', 'and the ingress already stripped client headers');
});

t.test('the CheckRequest object', async (t) => {
  const ex = fakeExchange({ rawHeaders: ['Content-Length', '3'], headers: { 'content-length': '3' } });
  const view = checkView(ex, []);
  const req = buildCheckRequest(ex, view, { includePeerCert: true, packAsBytes: false, stripPrefixes: [], now: 1_700_000_000_123.5 }, { bytes: Buffer.from('abc'), partial: false }) as {
    attributes: Record<string, any>;
  };
  const a = req.attributes;
  t.same(a.source, { principal: '', certificate: '', address: { socket_address: { address: '203.0.113.1', port_value: 0 } } }, 'XFF client: no port');
  t.same(a.destination.address, { socket_address: { address: '10.0.0.1', port_value: 8080 } });
  t.same(a.request.time, { seconds: 1_700_000_000, nanos: 123_500_000 });
  t.equal(a.request.http.size, 3);
  t.equal(a.request.http.body, 'abc');
  t.equal(a.request.http.headers['x-envoy-auth-partial-body'], 'false');
  t.notOk('x-envoy-auth-partial-body' in view.headers, 'the view itself is not changed');
  const bytes = buildCheckRequest(ex, view, { includePeerCert: false, packAsBytes: true, stripPrefixes: [], now: 0 }, { bytes: Buffer.from('abc'), partial: true }) as { attributes: Record<string, any> };
  t.same(bytes.attributes.request.http.raw_body, Buffer.from('abc'));
  t.equal(bytes.attributes.request.http.body, undefined);
  t.equal(bytes.attributes.request.http.headers['x-envoy-auth-partial-body'], 'true');
  const same = fakeExchange({ rawHeaders: [], clientAddress: '10.0.0.2' });
  t.equal((buildCheckRequest(same, checkView(same, []), { includePeerCert: false, packAsBytes: false, stripPrefixes: [], now: 0 }, undefined) as any).attributes.source.address.socket_address.port_value, 5555, 'the peer itself: its port');
});

t.test('a CONNECT: method CONNECT, no :path, an empty path, the authority as host', async (t) => {
  const ex = fakeExchange({ rawHeaders: ['Host', 'db.example:5432'], host: 'db.example:5432', path: '', query: '', pathWithQuery: '' });
  (ex.req as { method: string }).method = 'CONNECT';
  const view = checkView(ex, []);
  t.notOk(':path' in view.headers);
  t.equal(view.headers[':method'], 'CONNECT');
  t.equal(view.headers[':authority'], 'db.example:5432');
  const http = buildCheckRequest(ex, view, { includePeerCert: false, packAsBytes: false, stripPrefixes: [], now: 0 }, undefined).attributes.request.http;
  t.match(http, { method: 'CONNECT', path: '', host: 'db.example:5432' });
});
