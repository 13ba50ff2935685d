/**
 * gRPC through the mesh under `svcproxy up`: a grpc-js client in a replica's environment (its
 * `http_proxy`, which grpc-js honours with a CONNECT and HTTP/2 inside) calls another workload's
 * `grpc` port by its internal name. The call crosses the caller's outbound listener, an HTTP/2
 * session over mTLS, and the target's sidecar; the server sees the verified caller in
 * `x-forwarded-client-cert`, and a denied caller gets the firewall's answer as a gRPC status.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { request } from '../helpers/harness.js';
import { NODE, meshWorkload, startMeshUp } from './fixtures.js';

const run = promisify(execFile);
const GRPC = createRequire(import.meta.url).resolve('@grpc/grpc-js');
const method = `{path:'/test.Echo/Echo',requestStream:false,responseStream:false,requestSerialize:b=>b,requestDeserialize:b=>b,responseSerialize:b=>b,responseDeserialize:b=>b}`;
/** A gRPC server answering its call's metadata as JSON. */
const SERVER = `const g=require(${JSON.stringify(GRPC)});const s=new g.Server();
s.addService({echo:${method}},{echo:(call,cb)=>cb(null,Buffer.from(JSON.stringify(call.metadata.getMap())))});
s.bindAsync('127.0.0.1:'+process.env.PORT,g.ServerCredentials.createInsecure(),()=>{});`;
/** One call through the proxy in the environment; prints the answer or the status. */
const CLIENT = (target: string): string => `const g=require(${JSON.stringify(GRPC)});
const C=g.makeGenericClientConstructor({echo:${method}});const c=new C(${JSON.stringify(target)},g.credentials.createInsecure());
c.echo(Buffer.from('hi'),(err,res)=>{console.log(err?'status '+err.code+' '+err.details:res.toString());c.close();});`;

/** An HTTP/2 (prior knowledge) app whose answer's HEADERS and DATA leave in one write. */
const H2_APP = "require('http2').createServer((q,s)=>{s.writeHead(200,{'content-type':'text/plain'});s.end('h2 '+q.url)}).listen(process.env.PORT,'127.0.0.1')";

t.test('a gRPC call crosses the mesh over HTTP/2 and mTLS', async (t) => {
  const { envOf } = await startMeshUp(t, [
    meshWorkload('g1', 'rpc', { containers: [{ name: 'server', command: NODE, args: ['-e', SERVER], ports: [{ number: 50051, protocol: 'grpc' }] }], internal: { inboundAllowType: 'same-gvc' } }),
    meshWorkload('g1', 'locked', { containers: [{ name: 'server', command: NODE, args: ['-e', SERVER], ports: [{ number: 50051, protocol: 'grpc' }] }], internal: { inboundAllowType: 'none' } }),
    meshWorkload('g1', 'c'),
    meshWorkload('g1', 'h2app', { containers: [{ name: 'app', command: NODE, args: ['-e', H2_APP], ports: [{ number: 8443, protocol: 'http2' }] }], internal: { inboundAllowType: 'same-gvc' } }),
  ]);

  const ok = await run(NODE, ['-e', CLIENT('rpc.g1.internal.localhost:50051')], { env: envOf('g1/c') });
  const metadata = JSON.parse(ok.stdout) as Record<string, string>;
  t.match(metadata['x-forwarded-client-cert'], /^By=spiffe:\/\/acme\/gvc\/g1\/workload\/rpc;Hash=[0-9a-f]{64};URI=spiffe:\/\/acme\/gvc\/g1\/workload\/c$/, 'the server sees the verified caller');

  const denied = await run(NODE, ['-e', CLIENT('locked.g1.internal.localhost:50051')], { env: envOf('g1/c') });
  t.equal(denied.stdout.trim(), 'status 7 blocked by firewall', 'PERMISSION_DENIED with the firewall\'s message');

  // HTTP/1.1 callers of an http2 port: the HTTP/2 session over mTLS often delivers an answer's
  // HEADERS and DATA in one read, and Node emits the data before the 'response' event.
  const proxy = Number(new URL(envOf('g1/c').HTTP_PROXY!).port);
  const bad: string[] = [];
  await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    for (let j = 0; j < 25; j++) {
      const res = await request(proxy, 'h2app.g1.internal.localhost:8443', `/${i}-${j}`).catch((err: Error) => ({ status: 0, body: err.message }));
      if (res.status !== 200 || res.body !== `h2 /${i}-${j}`) bad.push(`${res.status} ${res.body.slice(0, 100)}`);
    }
  }));
  t.same(bad.slice(0, 5), [], 'every answer whole, head before body (500 requests, 20 at a time)');
});
