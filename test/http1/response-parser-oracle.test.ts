/**
 * svcproxy's upstream response parser (src/http1/response-parser.ts) against llhttp, Node's own
 * HTTP/1.1 parser, on thousands of seeded generated and mutated answers (Content-Length, chunked with
 * extensions and trailers, read to the close, interim 1xx, 204/304/HEAD, and mutations: obs-fold,
 * bare LF, bare CR, listed and repeated lengths, TE with CL, unknown codings, bad chunk sizes, NUL and
 * control bytes, ...), each also read split at every byte (random split points for long ones). The
 * rule: whatever llhttp rejects, svcproxy rejects; where both accept, status, fields, body, trailers
 * and the end of the answer are the same. Where svcproxy is deliberately stricter, the difference is
 * one of the named EXCEPTIONS below, each with its reason; anything else fails with the seed
 * (`SEED=n` replays a run, `CASES=n` sets how many answers).
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { bytewise, llhttpReads, oursReads, splitAt, type Outcome } from './response-parser-llhttp.js';
import { prng, testSeed } from '../helpers/seed.js';

// Tap's 120 s per file is a hang guard, raised: on a loaded machine this file takes long
// (thousands of generated answers read twice, CPU-bound: ~70 s with both cores busy).
t.setTimeout(300_000);

const SEED = testSeed('SEED', 20261127);
const CASES = Number(process.env.CASES ?? 4000);
const MAX_HEAD = 64 * 1024;


type Rnd = () => number;
const pick = <T>(rnd: Rnd, list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
const chance = (rnd: Rnd, p: number): boolean => rnd() < p;
const int = (rnd: Rnd, n: number): number => Math.floor(rnd() * n);

const REASONS = ['OK', '', 'Not Found', 'Bad Gateway', 'a b  c', 'caf\xe9', 'Moved\tHere'];
const STATUSES = [200, 200, 200, 201, 204, 206, 301, 302, 304, 400, 404, 418, 500, 503, 599];
const FIELDS: [string, string][] = [
  ['Content-Type', 'text/plain; charset=utf-8'], ['Server', 'app/1.0'], ['Date', 'Fri, 27 Nov 2026 16:00:00 GMT'],
  ['Cache-Control', 'no-store'], ['Set-Cookie', 'a=1; Path=/'], ['Set-Cookie', 'b=2'], ['X-A', ''], ['x-a', ' spaced  '],
  ['ETag', '"abc"'], ['Vary', 'Accept-Encoding, Origin'], ['Keep-Alive', 'timeout=5, max=100'], ['Connection', 'keep-alive'],
  ['Connection', 'close'], ['Trailer', 'X-Sum'], ['X-Latin', '\xe9t\xe9'], ['X-Tab', '\tin\ttabs\t'], ['Content_Length', '7'],
  ['Upgrade', 'websocket'], ['Link', '</a.css>; rel=preload'],
];
const TRAILERS: [string, string][] = [['X-Sum', 'abc'], ['Grpc-Status', '0'], ['x-empty', ''], ['X-Sum', 'again'], ['Server-Timing', 'db;dur=53']];
const EXTENSIONS = [';a', ';a=b', ';name="quoted value"', ';a=b;c', ';q="\\"x\\""', ';x=\xe9', '; a=b', ';a=b c', ';', ';=b', ';a=', ' ;a=b', '\t'];

/** Bytes a body may hold: anything, line breaks and the bytes of a head included. */
function body(rnd: Rnd, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += chance(rnd, 0.8) ? String.fromCharCode(97 + int(rnd, 26)) : pick(rnd, ['\r\n', '\n', '\r', '\x00', '\xff', '0\r\n\r\n', 'HTTP/1.1 200 OK\r\n']);
  return s;
}

interface Generated {
  wire: string;
  head: boolean;
}

/** A valid answer (to a GET or a HEAD), sometimes after interim answers, sometimes with bytes after it. */
function generate(rnd: Rnd): Generated {
  const head = chance(rnd, 0.1);
  let wire = '';
  for (let i = int(rnd, 3) - 1; i > 0; i--) wire += pick(rnd, ['HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n', 'HTTP/1.1 102 Processing\r\n\r\n']);
  const version = chance(rnd, 0.15) ? '1.0' : '1.1';
  const status = pick(rnd, STATUSES);
  const reason = pick(rnd, REASONS);
  wire += chance(rnd, 0.05) ? `HTTP/${version} ${status}\r\n` : `HTTP/${version} ${status} ${reason}\r\n`;
  for (let i = int(rnd, 6); i > 0; i--) {
    const [name, value] = pick(rnd, FIELDS);
    wire += `${name}:${chance(rnd, 0.8) ? ' ' : ''}${value}\r\n`;
  }
  const content = body(rnd, chance(rnd, 0.1) ? 0 : int(rnd, chance(rnd, 0.1) ? 3000 : 40));
  const framing = version === '1.0' ? pick(rnd, ['length', 'close']) : pick(rnd, ['length', 'length', 'chunked', 'chunked', 'close']);
  let after = '';
  if (framing === 'length') {
    wire += `Content-Length: ${content.length}\r\n\r\n`;
    after = content;
  } else if (framing === 'chunked') {
    wire += `Transfer-Encoding: ${pick(rnd, ['chunked', 'chunked', 'Chunked', ' chunked\t'])}\r\n\r\n`;
    for (let at = 0; at < content.length; ) {
      const n = 1 + int(rnd, Math.min(content.length - at, 700));
      const size = n.toString(16);
      after += `${chance(rnd, 0.2) ? size.toUpperCase() : size}${chance(rnd, 0.2) ? pick(rnd, EXTENSIONS.slice(0, 6)) : ''}\r\n${content.slice(at, at + n)}\r\n`;
      at += n;
    }
    after += `0${chance(rnd, 0.1) ? ';last' : ''}\r\n`;
    for (let i = chance(rnd, 0.4) ? 1 + int(rnd, 3) : 0; i > 0; i--) {
      const [name, value] = pick(rnd, TRAILERS);
      after += `${name}: ${value}\r\n`;
    }
    after += '\r\n';
  } else {
    wire += '\r\n';
    after = content;
  }
  // A HEAD answer, a 204 and a 304 have no body: what the generator wrote after the head is then
  // read as bytes after the answer (the next answer's, or stray ones), as any reader must.
  wire += after;
  if (framing !== 'close' && chance(rnd, 0.15)) wire += pick(rnd, ['HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged', 'x', '\r\n']);
  return { wire, head };
}

/** Lines that frame (or break the framing of) an answer when put into its head. */
const FRAMING_LINES = [
  'Content-Length: 2, 2', 'Content-Length: 2,2', 'Content-Length: 2', 'Content-Length: 3', 'Content-Length: 0', 'Content-Length:  2 ',
  'Content-Length: +2', 'Content-Length: 0x2', 'Content-Length: 2 2', 'Content-Length:', 'Content-Length: 00000000000000002',
  'Content-Length: 99999999999999999', 'content-length: 2', 'Transfer-Encoding: chunked', 'Transfer-Encoding: gzip',
  'Transfer-Encoding: gzip, chunked', 'Transfer-Encoding: chunked, gzip', 'Transfer-Encoding: identity', 'Transfer-Encoding: chunked, chunked',
  'Transfer-Encoding: x-chunked', 'Transfer-Encoding:', 'Transfer-Encoding: chunked\r\n , gzip', 'Content-Length: 1\r\n 2',
  'X-Folded: a\r\n b', 'X-Folded: a\r\n\tb', 'Connection: close', 'Connection: upgrade', 'Upgrade: websocket',
];
const BYTES = ['\x00', '\x01', '\x08', '\x0b', '\x0c', '\x1f', '\x7f', '\r', '\n', '\r\n', ' ', '\t', ':', ';', ',', '"', '\\', '\xff', '\xa0', 'a', '0', 'f', 'g', '-', '_'];
const STATUS_LINES = [
  'HTTP/1.1 200 OK', 'HTTP/1.1  200 OK', 'HTTP/2.0 200 OK', 'HTTP/1.2 200 OK', 'HTTP/0.9 200 OK', 'HTTP/1.10 200 OK', 'http/1.1 200 OK',
  'HTTP/1.1 2000 OK', 'HTTP/1.1 20 OK', 'HTTP/1.1 099 Low', 'HTTP/1.1 000 Zero', 'HTTP/1.1 200', 'HTTP/1.1 200\tOK', 'HTTP/1.1 200 O\x01K',
  'HTTP/1.1 200 O\x7fK', 'HTTP/1.1 101 Switching Protocols', 'HTTP/1.1 100 Continue', ' HTTP/1.1 200 OK', '\r\nHTTP/1.1 200 OK',
];
const CHUNK_SIZES = ['0x5', '5 ', ' 5', '5\t', '-5', '+5', 'fffffffffffffffff', '0000000000000005', 'g', '', '5;', '5 ;a', '5;a b', '5;a="b', '5;\xe9'];

/** One to three changes to a valid answer: a byte put in, taken out or changed, a line added, doubled or re-ended, ... */
function mutate(rnd: Rnd, wire: string): string {
  for (let n = 1 + int(rnd, 3); n > 0; n--) {
    const headEnd = Math.max(wire.indexOf('\r\n\r\n'), 0);
    // Mostly inside the head, where the framing is decided.
    const at = chance(rnd, 0.7) ? int(rnd, headEnd + 2) : int(rnd, wire.length + 1);
    const lineStart = wire.indexOf('\r\n', headEnd > 0 ? int(rnd, headEnd) : 0) + 2;
    switch (int(rnd, 9)) {
      case 0:
        wire = wire.slice(0, at) + pick(rnd, BYTES) + wire.slice(at);
        break;
      case 1:
        wire = wire.slice(0, at) + wire.slice(at + 1);
        break;
      case 2:
        wire = wire.slice(0, at) + pick(rnd, BYTES) + wire.slice(at + 1);
        break;
      case 3:
      case 4:
        if (lineStart > 1) wire = `${wire.slice(0, lineStart)}${pick(rnd, FRAMING_LINES)}\r\n${wire.slice(lineStart)}`;
        break;
      case 5: {
        // A line of the head twice.
        const end = wire.indexOf('\r\n', lineStart);
        if (lineStart > 1 && end > lineStart && end < headEnd + 2) wire = wire.slice(0, end + 2) + wire.slice(lineStart, end + 2) + wire.slice(end + 2);
        break;
      }
      case 6: {
        // One line ending (or all of them) as a bare LF or a bare CR.
        const ending = pick(rnd, ['\n', '\r', '\r\r\n', '\n\r']);
        if (chance(rnd, 0.3)) wire = wire.replaceAll('\r\n', ending);
        else {
          const i = wire.indexOf('\r\n', at);
          if (i >= 0) wire = wire.slice(0, i) + ending + wire.slice(i + 2);
        }
        break;
      }
      case 7: {
        const i = wire.indexOf('\r\n');
        wire = pick(rnd, STATUS_LINES) + wire.slice(i < 0 ? 0 : i);
        break;
      }
      default: {
        // A chunk-size line, where there is one.
        const m = /\r\n\r\n([0-9a-fA-F]+[^\r\n]*)\r\n/.exec(wire);
        if (m) wire = wire.replace(m[1]!, pick(rnd, CHUNK_SIZES));
        else wire = wire.slice(0, at) + pick(rnd, BYTES) + wire.slice(at);
      }
    }
  }
  return wire;
}

interface Exception {
  name: string;
  why: string;
  /** Given llhttp's accepting outcome and the wire, whether this exception covers the case. */
  covers(wire: string, llhttp: Outcome): boolean;
  /** svcproxy's rejection message. */
  ours: RegExp;
}

/** The status lines of the interim answers and of the final one, in order. */
function statusLines(wire: string): string[] {
  const lines: string[] = [];
  for (let at = 0; ; ) {
    const line = wire.slice(at, wire.indexOf('\r\n', at) >>> 0);
    lines.push(line);
    const end = wire.indexOf('\r\n\r\n', at);
    if (!/^HTTP\/\d\.\d 1\d\d\b/.test(line) || line.slice(9, 12) === '101' || end < 0) return lines;
    at = end + 4;
  }
}
const finalStatusLine = (wire: string): string => statusLines(wire).at(-1)!;
/** The final head's Transfer-Encoding lines, as sent (blanks kept), joined. */
function transferEncodingOf(wire: string): string {
  const line = finalStatusLine(wire);
  const at = wire.indexOf(line);
  const head = wire.slice(at, wire.indexOf('\r\n\r\n', at) >>> 0);
  return [...head.matchAll(/\r\ntransfer-encoding:([^\r\n]*)/gi)].map((m) => m[1]).join(',');
}

/** Where svcproxy refuses what llhttp (with `node:http`'s defaults) reads. Each is a deliberate choice. */
const EXCEPTIONS: Exception[] = [
  {
    name: 'a status below 100',
    why: 'RFC 9110 §15: a status code is 100-599; llhttp reads any three digits. Envoy refuses one below 100 too.',
    covers: (_w, o) => o.status !== undefined && o.status < 100,
    ours: /^invalid status \d+$/,
  },
  {
    name: 'an HTTP version other than 1.0 and 1.1',
    why: 'RFC 9112 §2.3: an HTTP/1 connection carries HTTP/1.0 or HTTP/1.1 answers; llhttp also reads 0.9 and 2.0 status lines.',
    covers: (w) => statusLines(w).some((line) => /^HTTP\/(?!1\.[01] )\d\.\d /.test(line)),
    ours: /^invalid status line/,
  },
  {
    name: 'a control character in the reason phrase',
    why: 'RFC 9112 §4: reason-phrase is HTAB, SP, VCHAR and obs-text; llhttp takes any byte but CR and LF there.',
    covers: (w) => statusLines(w).some((line) => /[\x00-\x08\x0a-\x1f\x7f]/.test(line)),
    ours: /^invalid status line/,
  },
  {
    name: 'an empty line before a status line',
    why: 'RFC 9112 §2.2 lets a server skip empty lines before a request-line only; an answer starts with its status line (llhttp skips CRLFs between messages).',
    covers: (w) => /(^|\r\n\r\n)\r\n/.test(w),
    ours: /^invalid status line ""$/,
  },
  {
    name: 'a transfer coding other than one chunked',
    why: 'RFC 9112 §6.1: chunked is applied once and last. llhttp reads a body under another coding (gzip, identity, `chunked` and a tab) to the close, and `chunked, chunked` as chunked; svcproxy cannot decode another coding and would forward the body with the coding dropped, so it refuses the answer.',
    covers: (w, o) => o.headers?.['transfer-encoding'] !== undefined && !/^[ \t]*chunked *$/i.test(transferEncodingOf(w)),
    ours: /^unsupported transfer-encoding/,
  },
  {
    name: 'an empty Transfer-Encoding',
    why: 'RFC 9112 §6.1: Transfer-Encoding lists at least one coding. llhttp 8 (Node 20) ignores one without a value (and frames by the length beside it); llhttp 9 (Node 22) refuses it, as svcproxy does on any answer, interim ones included.',
    covers: (w) => /\r\ntransfer-encoding:[ \t]*\r\n/i.test(w),
    ours: /^both content-length and transfer-encoding$|^unsupported transfer-encoding/,
  },
  {
    name: 'Transfer-Encoding in an HTTP/1.0 answer',
    why: 'RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; llhttp reads it chunked.',
    covers: (w, o) => finalStatusLine(w).startsWith('HTTP/1.0') && o.headers?.['transfer-encoding'] !== undefined,
    ours: /^transfer-encoding in an HTTP\/1\.0 response$/,
  },
  {
    name: 'a 204 with Transfer-Encoding',
    why: 'RFC 9112 §6.1: a server MUST NOT send Transfer-Encoding in a 204; llhttp ignores it (the answer has no body either way).',
    covers: (_w, o) => o.status === 204 && o.headers?.['transfer-encoding'] !== undefined,
    ours: /^a 204 answer with transfer-encoding$/,
  },
  {
    name: 'a 101 to a request that asked for no upgrade',
    why: 'RFC 9110 §15.2.2: 101 answers an Upgrade request; svcproxy sends none on its pooled connections, so the answer cannot be framed (node:http hands such a socket to an upgrade listener).',
    covers: (_w, o) => o.status === 101,
    ours: /^a 101 answer/,
  },
  {
    name: 'an empty chunk-extension name or value',
    why: 'RFC 9112 §7.1.1: chunk-ext-name and chunk-ext-val are tokens (or a quoted string), at least one character; llhttp takes `;=v` and `;n=`.',
    covers: (w) => /\r\n[0-9a-fA-F]+(;[^\r\n]*)?;(=|[^\r\n=;]*=(;|\r))/.test(w),
    ours: /^invalid chunk size line/,
  },
  {
    name: 'a length or chunk size past 15 digits',
    why: 'Past 15 decimal (or hex) digits a length is no longer exact in a JavaScript number; no real body is that long. llhttp reads up to 2^64.',
    covers: (w) => /\r\ncontent-length:[ \t]*\d{16,}/i.test(w) || /\r\n[0-9a-fA-F]{16,}[;\r]/.test(w),
    ours: /^invalid content-length|^invalid chunk size line/,
  },
];

interface Checked {
  cases: number;
  reads: number;
  bothAccept: number;
  bothReject: number;
  excepted: Map<string, number>;
  /** Exceptions this Node's llhttp agrees with (both refuse). */
  agreed: Set<string>;
}

/** Compare one answer; returns a failure description, or undefined. */
function check(wire: string, head: boolean, rnd: Rnd, stats: Checked): string | undefined {
  const bytes = Buffer.from(wire, 'latin1');
  const opts = { head, maxHeaderSize: MAX_HEAD };
  // One byte at a time: llhttp then says exactly where the answer ended.
  const reference = llhttpReads(bytewise(bytes), opts);
  const whole = oursReads([bytes], opts);
  stats.cases++;
  // An upgrade is an answer llhttp accepts (and node:http hands the socket over): svcproxy must
  // accept it alike or refuse it by a named exception.
  if (reference.verdict === 'rejected') {
    if (whole.verdict !== 'rejected') return `llhttp ${reference.verdict} (${reference.reason}), svcproxy ${whole.verdict}`;
    stats.bothReject++;
    // Node's llhttp may already be as strict as an exception (Node 22 refuses an empty coding).
    const e = EXCEPTIONS.find((x) => x.covers(wire, reference) && x.ours.test(whole.reason ?? ''));
    if (e) stats.agreed.add(e.name);
  } else if (whole.verdict === 'rejected') {
    const e = EXCEPTIONS.find((x) => x.covers(wire, reference) && x.ours.test(whole.reason ?? ''));
    if (!e) return `llhttp accepts (status ${reference.status}), svcproxy rejects: ${whole.reason}`;
    stats.excepted.set(e.name, (stats.excepted.get(e.name) ?? 0) + 1);
  } else {
    stats.bothAccept++;
    const a = JSON.stringify({ ...reference, reason: undefined });
    const b = JSON.stringify({ ...whole, reason: undefined });
    if (a !== b) return `framing differs:\n  llhttp   ${a}\n  svcproxy ${b}`;
  }
  // The same answer in other reads: every split point for short ones, random points for long ones.
  // The reason a rejection gives may name another line when the bytes come otherwise (a bad byte
  // is reported once its line is complete); the verdict and the framing may not differ.
  const expected = JSON.stringify({ ...whole, reason: undefined });
  const splits: number[][] = [];
  if (bytes.length <= 600) for (let i = 1; i < bytes.length; i++) splits.push([i]);
  else for (let i = 0; i < 60; i++) splits.push(Array.from({ length: 1 + int(rnd, 8) }, () => int(rnd, bytes.length)).sort((x, y) => x - y));
  splits.push([]);
  for (const points of splits) {
    stats.reads++;
    const got = JSON.stringify({ ...oursReads(splitAt(bytes, points), opts), reason: undefined });
    if (got !== expected) return `split at ${points.join(',')} reads otherwise:\n  whole ${expected}\n  split ${got}`;
  }
  const byByte = JSON.stringify({ ...oursReads(bytewise(bytes), opts), reason: undefined });
  if (byByte !== expected) return `byte by byte reads otherwise:\n  whole ${expected}\n  bytes ${byByte}`;
  return undefined;
}

t.test(`generated and mutated answers agree with llhttp (seed ${SEED})`, async (t) => {
  const rnd = prng(SEED);
  const stats: Checked = { cases: 0, reads: 0, bothAccept: 0, bothReject: 0, excepted: new Map(), agreed: new Set() };
  let failures = 0;
  for (let i = 0; i < CASES && failures < 5; i++) {
    const g = generate(rnd);
    const wire = chance(rnd, 0.55) ? mutate(rnd, g.wire) : g.wire;
    const failure = check(wire, g.head, rnd, stats);
    if (failure) {
      failures++;
      t.fail(`seed ${SEED}, case ${i}${g.head ? ' (HEAD)' : ''} ${JSON.stringify(wire.length > 400 ? `${wire.slice(0, 400)}...` : wire)}: ${failure}`);
    }
  }
  t.equal(failures, 0, `${stats.cases} answers, ${stats.reads} split reads: ${stats.bothAccept} read alike, ${stats.bothReject} refused by both, ${[...stats.excepted].map(([k, v]) => `${v} ${k}`).join(', ')}`);
  t.ok(stats.bothAccept > CASES / 4 && stats.bothReject > CASES / 10, 'both sides of the rule were exercised');
});


/** One answer per class the issue names, and one per exception (each must be seen, so none rots). */
const FIXED: [string, string, boolean?][] = [
  ['a listed length', 'HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok'],
  ['a length sent twice', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok'],
  ['differing lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok'],
  ['TE with CL', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n'],
  ['TE with CL on a HEAD answer', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n', true],
  ['obs-fold', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok'],
  ['bare LF', 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok'],
  ['bare CR', 'HTTP/1.1 200 OK\r\nX-A: 1\r2\r\nContent-Length: 2\r\n\r\nok'],
  ['NUL in a value', 'HTTP/1.1 200 OK\r\nX-A: 1\x002\r\nContent-Length: 2\r\n\r\nok'],
  ['a bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n'],
  ['a chunk size and a blank', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nok\r\n0\r\n\r\n'],
  ['chunked and a tab', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\r\n\r\n2\r\nok\r\n0\r\n\r\n'],
  ['chunked with extensions and trailers', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a=b;c="d e"\r\nok\r\n0\r\nX-T: 1\r\n\r\n'],
  ['interim answers', 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'],
  ['to the close', 'HTTP/1.0 200 OK\r\n\r\nall of it'],
  ['a 304 with a length', 'HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n'],
  ['HEAD', 'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n', true],
  ['exception: status below 100', 'HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n'],
  ['exception: HTTP/2.0', 'HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n'],
  ['exception: control in reason', 'HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n'],
  ['exception: empty line first', '\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'],
  ['exception: gzip', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz'],
  ['exception: empty TE', 'HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\nContent-Length: 0\r\n\r\n'],
  ['exception: empty TE on an interim answer', 'HTTP/1.1 102 Processing\r\nTransfer-Encoding:\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'],
  ['exception: TE in 1.0', 'HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
  ['exception: 204 with TE', 'HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n'],
  ['exception: 101', 'HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n'],
  ['exception: empty extension name', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;=b\r\nok\r\n0\r\n\r\n'],
  ['exception: sixteen digits', 'HTTP/1.1 200 OK\r\nContent-Length: 0000000000000002\r\n\r\nok'],
];

t.test('fixed answers: the classes the issue names, and every exception seen', async (t) => {
  const stats: Checked = { cases: 0, reads: 0, bothAccept: 0, bothReject: 0, excepted: new Map(), agreed: new Set() };
  const rnd = prng(SEED);
  for (const [name, wire, head] of FIXED) t.equal(check(wire, head ?? false, rnd, stats), undefined, name);
  for (const e of EXCEPTIONS) t.ok(stats.excepted.has(e.name) || stats.agreed.has(e.name), `exception exercised: ${e.name}`);
  const length = oursReads([Buffer.from(FIXED[0]![1], 'latin1')], { head: false, maxHeaderSize: MAX_HEAD });
  t.equal(length.verdict, 'rejected', 'Content-Length: 2, 2 is refused, never passed on');
});

/** What `http.request` makes of `wire` written by a raw server: the oracle's own reading, end to end. */
async function nodeClientReads(port: number, wire: string, head: boolean): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (o: Outcome): void => {
      if (!settled) resolve(o);
      settled = true;
    };
    const req = http.request({ host: '127.0.0.1', port, method: head ? 'HEAD' : 'GET', path: `/${Buffer.from(wire, 'latin1').toString('base64url')}`, agent: false, maxHeaderSize: MAX_HEAD }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        const out: Outcome = { verdict: 'complete', body, status: res.statusCode!, headers: headerMapOf(res.rawHeaders) };
        if (res.rawTrailers.length > 0) out.trailers = headerMapOf(res.rawTrailers);
        done(out);
      });
      res.on('error', () => done({ verdict: 'rejected', body: '' }));
      res.on('aborted', () => done({ verdict: 'rejected', body: '' }));
    });
    req.on('error', () => done({ verdict: 'rejected', body: '' }));
    req.end();
  });
}

const headerMapOf = (raw: string[]) => {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === '__proto__') continue;
    const prior = out[name];
    out[name] = prior === undefined ? raw[i + 1]! : Array.isArray(prior) ? [...prior, raw[i + 1]!] : [prior, raw[i + 1]!];
  }
  return out;
};

t.test(`the oracle reads as node:http's client does over a real socket (seed ${SEED})`, async (t) => {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    let got = '';
    socket.on('data', (d) => {
      got += d.toString('latin1');
      const m = /^\S+ \/(\S*) HTTP\/1\.1\r\n[^]*?\r\n\r\n/.exec(got);
      if (m) socket.end(Buffer.from(m[1]!, 'base64url'));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const rnd = prng(SEED + 1);
  const cases: Generated[] = [];
  while (cases.length < 300) {
    const g = generate(rnd);
    const wire = chance(rnd, 0.5) ? mutate(rnd, g.wire) : g.wire;
    const reference = llhttpReads(bytewise(Buffer.from(wire, 'latin1')), { head: g.head, maxHeaderSize: MAX_HEAD });
    // node:http parses bytes after a complete answer as the next one and may then fail the request
    // that already has its answer; and a 101 goes to an upgrade listener. Neither is framing.
    if (reference.verdict === 'complete' && reference.end !== wire.length) continue;
    if (reference.status === 101 || reference.verdict === 'upgrade') continue;
    cases.push({ wire, head: g.head });
  }
  let same = 0;
  for (let i = 0; i < cases.length; i += 25) {
    const batch = cases.slice(i, i + 25);
    const got = await Promise.all(batch.map((c) => nodeClientReads(port, c.wire, c.head)));
    batch.forEach((c, j) => {
      const reference = llhttpReads(bytewise(Buffer.from(c.wire, 'latin1')), { head: c.head, maxHeaderSize: MAX_HEAD });
      const expected = reference.verdict === 'complete' ? JSON.stringify({ ...reference, end: undefined }) : 'rejected';
      const actual = got[j]!.verdict === 'complete' ? JSON.stringify(got[j]) : 'rejected';
      if (expected === actual) same++;
      else t.fail(`seed ${SEED}: ${JSON.stringify(c.wire)}${c.head ? ' (HEAD)' : ''}\n  oracle ${expected}\n  client ${actual}`);
    });
  }
  t.equal(same, cases.length, `${same} of ${cases.length} answers read alike by the oracle and by http.request`);
});
