/**
 * One access log's gRPC stream (`StreamAccessLogs`), as Envoy's http_grpc logger keeps it: entries
 * are batched and written every `buffer_flush_interval` or as soon as `buffer_size_bytes` are
 * buffered; the first message of each stream carries the identifier (node and log name), later ones
 * only entries. The stream stays open; when it fails (server gone, restarted), the next batch waits
 * for the channel to be ready again, with jittered exponential backoff (the next target of the
 * cluster is tried each time). The channel is TLS when the cluster has a TLS transport socket (a
 * certificate that does not verify is a failed connection like any other). While no stream is open
 * entries stay buffered up to a bound (`maxBufferedBytes`, default 1 MiB); beyond it they are
 * dropped and counted. Entries already written to a stream that then fails are lost, as in Envoy
 * (the protocol has no acknowledgements). Nothing here throws or blocks the caller.
 */
import type * as grpc from '@grpc/grpc-js';
import { grpcJs } from '../grpc/lazy.js';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { AccessLogSpec } from './config.js';
import { streamMethod, type HttpAccessLogEntry, type NodeMessage, type StreamAccessLogsMessage } from './proto.js';

export interface StreamMetrics {
  readonly sent: Counter.Internal;
  readonly dropped: Counter.Internal;
  readonly failures: Counter.Internal;
}

export interface AccessLogStreamOptions {
  /** Bound on entries buffered while no stream is open (bytes, approximate; default 1 MiB). */
  readonly maxBufferedBytes?: number;
  /** Reconnect backoff: first delay and cap (defaults 250 ms and 30 s), fully jittered. */
  readonly reconnectInitialMs?: number;
  readonly reconnectMaxMs?: number;
  /** How long one connection attempt may take (default 5 s). */
  readonly connectTimeoutMs?: number;
  readonly random?: () => number;
}

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  // Keep grpc's own reconnect backoff short: our loop decides when to try.
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 5000,
  'grpc.keepalive_time_ms': 60_000,
};

export class AccessLogStream {
  private buffer: HttpAccessLogEntry[] = [];
  private bytes = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private call: grpc.ClientWritableStream<StreamAccessLogsMessage> | undefined;
  private callEnded: Promise<void> | undefined;
  private identified = false;
  private backedUp = false;
  private connecting = false;
  private failuresInRow = 0;
  private target = 0;
  private readonly clients = new Map<string, grpc.Client>();
  private closed = false;
  private lastWarn = 0;
  private readonly maxBufferedBytes: number;

  constructor(
    readonly spec: AccessLogSpec,
    private readonly node: NodeMessage,
    private readonly metrics: StreamMetrics,
    private readonly log: Logger,
    private readonly opts: AccessLogStreamOptions = {},
  ) {
    this.maxBufferedBytes = Math.max(opts.maxBufferedBytes ?? 1024 * 1024, spec.bufferBytes);
  }

  /** Queue one entry (`size`: its approximate encoded size). */
  push(entry: HttpAccessLogEntry, size: number): void {
    if (this.closed) return;
    if (this.bytes + size > this.maxBufferedBytes) {
      this.metrics.dropped.inc();
      return;
    }
    this.buffer.push(entry);
    this.bytes += size;
    if (this.bytes >= this.spec.bufferBytes) this.flush();
    else if (!this.flushTimer) {
      this.flushTimer = setTimeout(() => this.flush(), this.spec.flushMs);
      this.flushTimer.unref();
    }
  }

  /** Write what is buffered to the stream, opening one first when there is none. */
  flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.buffer.length === 0) return;
    if (!this.call) return this.connect();
    if (this.backedUp) return;
    const entries = this.buffer;
    this.buffer = [];
    this.bytes = 0;
    const message: StreamAccessLogsMessage = { http_logs: { log_entry: entries } };
    if (!this.identified) {
      message.identifier = { node: this.node, log_name: this.spec.logName };
      this.identified = true;
    }
    if (!this.call.write(message)) {
      this.backedUp = true;
      this.call.once('drain', () => {
        this.backedUp = false;
        this.flush();
      });
    }
    this.metrics.sent.inc(entries.length);
  }

  /** Whether a stream is open (tests, `/config`). */
  get connected(): boolean {
    return this.call !== undefined;
  }

  private clientFor(target: string): grpc.Client {
    let client = this.clients.get(target);
    if (!client) {
      const tls = this.spec.tls;
      // TLS: the certificate must chain to trusted_ca (else the system roots) and name `sni` (else
      // the target's host); `sni` is also the server name sent. The client certificate, if any, is
      // presented when the server asks for one.
      const { credentials: creds, Client } = grpcJs();
      const pem = (text: string | undefined): Buffer | null => (text === undefined ? null : Buffer.from(text));
      const credentials = tls ? creds.createSsl(pem(tls.ca), pem(tls.key), pem(tls.cert)) : creds.createInsecure();
      const options = tls?.sni ? { ...CHANNEL_OPTIONS, 'grpc.ssl_target_name_override': tls.sni, 'grpc.default_authority': tls.sni } : CHANNEL_OPTIONS;
      client = new Client(target, credentials, options);
      this.clients.set(target, client);
    }
    return client;
  }

  private connect(): void {
    if (this.connecting || this.call || this.closed || this.retryTimer) return;
    this.connecting = true;
    const targets = this.spec.targets;
    const client = this.clientFor(targets[this.target % targets.length]!);
    client.waitForReady(Date.now() + (this.opts.connectTimeoutMs ?? 5000), (err) => {
      this.connecting = false;
      if (this.closed) return;
      if (err) return this.failed(err);
      this.open(client);
    });
  }

  private open(client: grpc.Client): void {
    const method = streamMethod();
    let endCall!: () => void;
    this.callEnded = new Promise((resolve) => (endCall = resolve));
    const call = client.makeClientStreamRequest<StreamAccessLogsMessage, object>(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      new (grpcJs().Metadata)(),
      {},
      (err) => {
        endCall();
        if (this.call !== call) return;
        this.call = undefined;
        this.identified = false;
        this.backedUp = false;
        if (this.closed) return;
        if (err) this.failed(err);
        else if (this.buffer.length > 0) this.connect();
      },
    );
    // The final status goes to the callback above; keep stream errors from being unhandled.
    call.on('error', () => undefined);
    this.call = call;
    this.identified = false;
    this.failuresInRow = 0;
    this.flush();
  }

  private failed(err: Error): void {
    this.metrics.failures.inc();
    this.target++;
    const initial = this.opts.reconnectInitialMs ?? 250;
    const cap = this.opts.reconnectMaxMs ?? 30_000;
    const delay = Math.round((this.opts.random ?? Math.random)() * Math.min(cap, initial * 2 ** Math.min(this.failuresInRow++, 16)));
    const now = Date.now();
    if (now - this.lastWarn >= 30_000) {
      this.lastWarn = now;
      this.log.warn({ log: this.spec.logName, workload: this.spec.workload, targets: this.spec.targets, err: err.message }, 'access-log stream failed; reconnecting');
    }
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.buffer.length > 0) this.connect();
    }, delay);
    this.retryTimer.unref();
  }

  /** Write what is buffered, end the stream and close the channels, within `timeoutMs`. */
  async close(timeoutMs = 2000): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    clearTimeout(this.flushTimer);
    clearTimeout(this.retryTimer);
    if (this.buffer.length > 0) this.metrics.dropped.inc(this.buffer.length);
    this.buffer = [];
    const call = this.call;
    if (call) {
      call.end();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.callEnded, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
    }
    this.call = undefined;
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}
