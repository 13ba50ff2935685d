/**
 * V8 settings for a proxy's allocation pattern. bin/svcproxy.js applies them before it loads the
 * program's modules (loading them is itself a few garbage collections' worth of allocation), and
 * cli.ts imports this first for callers that load dist/cli.js themselves; `--workers` processes
 * start through the same entry. test/cli/v8-flags.test.ts watches V8's pretenuring reports.
 *
 * Allocation-site pretenuring is off. A request's objects (parsed upstream headers, the check call's
 * promise and timer, the HTTP/2 stream) live for the request's few milliseconds: sites whose objects
 * are alive at a scavenge while a check is awaited got pretenured, so later requests' objects went
 * straight to the old generation, every scavenge had to walk their old-to-new references, and dead
 * requests piled up until a mark-compact. Measured on the ext auth sidecar of the bench (5 s of wrk,
 * 50 connections): scavenges 280 ms and 6 mark-compacts with it on, 85 ms and none with it off; in
 * alternating A/Bs 5–40% less CPU a request with ext auth, and a few percent without tags.
 *
 * The old generation may grow to 4× what survived the last full collection before the next one
 * starts (`--heap-growing-percent=300`: V8's own largest factor, fixed). V8 otherwise picks the
 * factor from how fast its collections ran against the program, and a proxy streaming large bodies
 * could settle on 1.3–1.6 (seen with `--trace-gc-verbose`): with a 15 MB heap and the socket-read
 * buffers' external memory, a full collection every 50 ms, concurrent marking a quarter of the CPU,
 * and the process stayed in that state for its life. 1 MiB request bodies through the sidecar: 1.1
 * against 1.7 ms of CPU a request (medians of twelve runs over six processes each); memory after
 * start, with 1,000 idle connections and over a fixed-rate soak unchanged in the bench.
 *
 * The young generation does not grow while the program starts (`--semi-space-growth-factor=1`,
 * V8's default 2 back once it serves: `startupDone()`, which Runtime.start and the rate-limit
 * service call once their listeners are bound, or 10 s after start whatever the command). Loading the modules and the configuration
 * is the one time nearly everything allocated survives, so V8 grew the young generation to its
 * 16 MiB maximum then, and an idle process kept those pages for its life (V8 shrinks it only once
 * its allocation rate is low at a full collection). Growing again under load, it is what it was.
 * Idle untagged sidecar: 67.1 against 70.6 MiB VmRSS (median of 5 processes; the bench's
 * `--only memory`).
 *
 * TurboFan is off while the program's modules load (`--no-turbofan` until `modulesLoaded()`, which
 * cli.ts calls once its whole import graph is evaluated). Resolving and loading some 200 modules
 * makes Node's own loader functions hot (`URL`, `getPathFromURLPosix`, `normalizeString`, ...):
 * about 20 of them were optimized at every start, code that nothing runs again, and the first
 * optimization pages in the compiler's own code and fills its threads' malloc arenas. The
 * configuration is loaded and compiled after it, with TurboFan on (a 10,000-workload file wants it).
 * Idle untagged sidecar 5 s after its first request: 63.6 against 66.3 MiB VmRSS; 30 s after, once
 * V8's memory reducer has run, 60.5 against 62.8; after 300 requests 68.6 against 69.4 (medians of
 * 3-4 processes; from then on requests make functions hot and TurboFan runs as before).
 */
import v8 from 'node:v8';

v8.setFlagsFromString('--no-allocation-site-pretenuring');
v8.setFlagsFromString('--heap-growing-percent=300');
v8.setFlagsFromString('--semi-space-growth-factor=1');
v8.setFlagsFromString('--no-turbofan');

let loading = true;
let starting = true;

/** The program's modules are loaded: TurboFan may optimize again. */
export function modulesLoaded(): void {
  if (!loading) return;
  loading = false;
  v8.setFlagsFromString('--turbofan');
}

/** The program serves: the young generation may grow again, by V8's default factor. */
export function startupDone(): void {
  if (!starting) return;
  starting = false;
  modulesLoaded();
  v8.setFlagsFromString('--semi-space-growth-factor=2');
}

// Every command, however it ends its start-up (or never does), is past both after 10 s.
setTimeout(startupDone, 10_000).unref();
