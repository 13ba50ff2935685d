/**
 * glibc malloc's thresholds, raised once at start. Node's HTTP parser copies every piece of a
 * request body it reads into a fresh malloc'd buffer (up to 64 KiB), freed only when the garbage
 * collector finds it dead; between two collections a proxy streaming uploads leaves megabytes of
 * them. With glibc's defaults the heap gives its free top back to the kernel as soon as it passes
 * 128 KiB (the trim threshold), so after each collection the next copies fault fresh pages in
 * again, each one cleared by the kernel. Streaming 1 MiB request bodies through the sidecar, those
 * page faults (`perf`: `exc_page_fault`, `clear_page_erms` under the parser's `memmove`) were a
 * quarter of the kernel's time, and how often a process hit them set which of two states it
 * settled in for its life (0.7–0.8 or 1.0–1.7 ms of CPU a request).
 *
 * glibc raises its thresholds by itself the first time a block it mapped on its own is freed: the
 * mmap threshold to that block's size, the trim threshold to twice that (malloc(3),
 * M_MMAP_THRESHOLD; only for blocks up to 32 MiB). So this frees one 16 MiB block now: blocks under
 * 16 MiB come from the heap, and up to 32 MiB of free heap is kept for reuse instead of being
 * returned. Fresh sidecars, three 5 s runs each, four processes per setting: 0.70–0.95 ms a request
 * with it, 0.74–1.28 without, 0.70–1.04 with a 4 MiB block; RSS after the load 126–134 MiB against
 * 101–123. Environment variables (`MALLOC_TRIM_THRESHOLD_`, ...) would do the same but must be set
 * by whoever starts the process. Under another allocator (musl, macOS) this allocates and frees
 * 16 MiB once, and nothing more. The full collection it needs runs before the program's modules are
 * loaded (a few milliseconds). test/cli/allocator.test.ts watches where 1 MiB buffers come from.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

/** The block freed at start: glibc's mmap threshold becomes this, its trim threshold twice this. */
export const MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024;

function raiseMallocThresholds(): void {
  // A buffer of that size is a mapping of its own under glibc's defaults; freeing it (a full
  // collection frees its backing store) is what moves the thresholds.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as (() => void) | undefined;
  v8.setFlagsFromString('--no-expose-gc');
  Buffer.allocUnsafeSlow(MMAP_THRESHOLD_BYTES);
  // The first collection finds the buffer dead; V8 may free its backing store later, on a
  // background thread (concurrent array-buffer sweeping). The second one begins by finishing that
  // sweep, so the block is freed, and the thresholds moved, before this returns: with one, about one
  // start in 40 still mapped 1 MiB buffers on their own (test/cli/allocator.test.ts).
  gc?.();
  gc?.();
}

raiseMallocThresholds();
