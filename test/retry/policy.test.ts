/**
 * Retry classification as a table: every Envoy HTTP and gRPC condition against responses and
 * failures, numeric status codes, gRPC status in headers, and attempts 0.
 */
import t from 'tap';
import { compileRetryPolicy, type AttemptOutcome } from '../../src/retry/policy.js';

const res = (status: number, headers: Record<string, string> = {}): AttemptOutcome => ({ kind: 'response', status, headers });
const fail = (failure: 'connect-failure' | 'reset' | 'reset-before-request' | 'refused-stream'): AttemptOutcome => ({ kind: 'failure', failure });

const cases: [retryOn: string[], outcome: AttemptOutcome, retry: boolean, what: string][] = [
  [['5xx'], res(500), true, '5xx: 500'],
  [['5xx'], res(503), true, '5xx: 503'],
  [['5xx'], res(404), false, '5xx: 404'],
  [['5xx'], fail('connect-failure'), true, '5xx covers connect failures'],
  [['5xx'], fail('reset'), true, '5xx covers resets'],
  [['5xx'], fail('refused-stream'), true, '5xx covers refused streams'],
  [['gateway-error'], res(502), true, 'gateway-error: 502'],
  [['gateway-error'], res(503), true, 'gateway-error: 503'],
  [['gateway-error'], res(504), true, 'gateway-error: 504'],
  [['gateway-error'], res(500), false, 'gateway-error: not 500'],
  [['gateway-error'], fail('reset'), true, 'gateway-error covers resets'],
  [['reset'], fail('reset'), true, 'reset'],
  [['reset'], fail('connect-failure'), true, 'reset covers connect failures'],
  [['reset'], res(503), false, 'reset: not a response'],
  [['reset-before-request'], fail('reset-before-request'), true, 'reset-before-request'],
  [['reset-before-request'], fail('connect-failure'), true, 'a connect failure is before the request'],
  [['reset-before-request'], fail('reset'), false, 'reset after the request started is not'],
  [['connect-failure'], fail('connect-failure'), true, 'connect-failure'],
  [['connect-failure'], fail('reset'), false, 'connect-failure: not a reset'],
  [['connect-failure'], res(503), false, 'connect-failure: not a 503'],
  [['refused-stream'], fail('refused-stream'), true, 'refused-stream'],
  [['refused-stream'], fail('reset'), false, 'refused-stream: not other resets'],
  [['retriable-4xx'], res(409), true, 'retriable-4xx: 409'],
  [['retriable-4xx'], res(429), false, 'retriable-4xx: only 409'],
  [['retriable-status-codes', '418'], res(418), true, 'retriable-status-codes with a code'],
  [['503'], res(503), true, 'a bare numeric code'],
  [['503'], res(502), false, 'a bare numeric code only'],
  [['retriable-status-codes'], res(503), false, 'no codes listed'],
  [['envoy-ratelimited'], res(429, { 'x-envoy-ratelimited': 'true' }), true, 'envoy-ratelimited'],
  [['envoy-ratelimited'], res(429), false, 'envoy-ratelimited needs the header'],
  [['retriable-headers'], res(503), false, 'retriable-headers with no header list matches nothing (as Envoy)'],
  [['unavailable'], res(200, { 'grpc-status': '14' }), true, 'gRPC unavailable in headers'],
  [['cancelled'], res(200, { 'grpc-status': '1' }), true, 'gRPC cancelled'],
  [['deadline-exceeded'], res(200, { 'grpc-status': '4' }), true, 'gRPC deadline-exceeded'],
  [['resource-exhausted'], res(200, { 'grpc-status': '8' }), true, 'gRPC resource-exhausted'],
  [['internal'], res(200, { 'grpc-status': '13' }), true, 'gRPC internal'],
  [['unavailable'], res(200, { 'grpc-status': '13' }), false, 'gRPC: only the listed codes'],
  [['unavailable'], res(200), false, 'gRPC status absent from headers (in trailers): not retried'],
  [['unavailable'], fail('connect-failure'), false, 'gRPC conditions do not cover connect failures'],
];

for (const [retryOn, outcome, retry, what] of cases) {
  t.equal(compileRetryPolicy({ attempts: 2, retryOn }).shouldRetry(outcome), retry, what);
}

t.test('the platform default list', async (t) => {
  const p = compileRetryPolicy({
    attempts: 2,
    retryOn: ['connect-failure', 'refused-stream', 'unavailable', 'cancelled', 'resource-exhausted', 'retriable-status-codes'],
  });
  t.equal(p.retries, 2);
  t.ok(p.shouldRetry(fail('connect-failure')));
  t.ok(p.shouldRetry(fail('refused-stream')));
  t.notOk(p.shouldRetry(fail('reset')), 'a reset mid-request is not retried by default');
  t.notOk(p.shouldRetry(res(503)), 'a plain 503 is not retried by default');
  t.ok(p.shouldRetry(res(200, { 'grpc-status': '14' })));
});

t.test('attempts 0 never retries', async (t) => {
  const p = compileRetryPolicy({ attempts: 0, retryOn: ['5xx'] });
  t.equal(p.retries, 0);
  t.notOk(p.shouldRetry(res(503)));
});

t.test('workloads sharing a policy model share its compiled policy', async (t) => {
  const { DEFAULT_RETRY_POLICY } = await import('../../src/config/compile-workload.js');
  const a = compileRetryPolicy(DEFAULT_RETRY_POLICY);
  t.equal(compileRetryPolicy(DEFAULT_RETRY_POLICY), a, 'the default model is compiled once');
  t.equal(a.retries, DEFAULT_RETRY_POLICY.attempts);
  const own = { attempts: 1, retryOn: ['5xx'] };
  t.not(compileRetryPolicy(own), a, 'a workload with its own policy gets its own');
  t.equal(compileRetryPolicy(own).shouldRetry({ kind: 'response', status: 503, headers: {} }), true);
  t.equal(a.shouldRetry({ kind: 'response', status: 500, headers: {} }), false, 'the default list does not retry a plain 500');
});
