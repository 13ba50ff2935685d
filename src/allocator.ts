/**
 * glibc malloc's thresholds, raised once at start. Every socket read lands in a fresh 64 KiB
 * buffer from malloc, freed when the garbage collector finds it dead; with glibc's defaults the heap
 * gives its free top back to the kernel as soon as it passes 128 KiB (the trim threshold), so the
 * next reads fault fresh pages in again (the kernel clears each one). Streaming 1 MiB request bodies
 * through the sidecar, a quarter of its reads' kernel time was those page faults (`perf`:
 * `exc_page_fault`, `clear_page_erms` under `read`), and the same process with a high trim threshold
 * (`MALLOC_TRIM_THRESHOLD_`) spent 0.7–1.0 against 1.0–1.4 ms of CPU a request.
 *
 * glibc raises its thresholds by itself the first time a block it mapped on its own is freed: the
 * mmap threshold to that block's size, the trim threshold to twice that (malloc(3), M_MMAP_THRESHOLD).
 * So this frees one such block now: blocks under 4 MiB come from the heap, and up to 8 MiB of free
 * heap is kept for reuse instead of being returned and faulted in again. Environment variables
 * (`MALLOC_TRIM_THRESHOLD_`, ...) would do the same but must be set before the process starts, by
 * whoever starts it. Under another allocator (musl, macOS) this allocates and frees 4 MiB once, and
 * nothing more. The full collection it needs runs before the program's modules are loaded (a few
 * milliseconds). test/cli/allocator.test.ts watches where larger buffers come from.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

/** The block freed at start: glibc's mmap threshold becomes this, its trim threshold twice this. */
export const MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024;

function raiseMallocThresholds(): void {
  // A buffer of that size is a mapping of its own under glibc's defaults; freeing it (a full
  // collection frees its backing store) is what moves the thresholds.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as (() => void) | undefined;
  v8.setFlagsFromString('--no-expose-gc');
  let block: Buffer | undefined = Buffer.allocUnsafeSlow(MMAP_THRESHOLD_BYTES);
  block[0] = 0;
  block = undefined;
  gc?.();
}

raiseMallocThresholds();
