#!/usr/bin/env node
// The installed entry point: runs the compiled CLI (`npm ci` builds dist/ through the prepare script).
const argv = process.argv.slice(2);
// The command-line client (`svcproxy rest ...`) has its own small entry: a command started hundreds of
// times in scripts loads none of the data plane below (dist/client/words.js imports nothing).
const { clientCommandOf } = await import('../dist/client/words.js');
const entry = clientCommandOf(argv)
  ? await import('../dist/client/main.js')
  : await dataPlane();

async function dataPlane() {
  // V8's settings (dist/v8-flags.js) are applied before the program's modules are even loaded, so
  // nothing the program allocates is subject to the settings it turns off.
  await import('../dist/v8-flags.js');
  // glibc malloc's thresholds (dist/allocator.js), raised before the program allocates anything.
  await import('../dist/allocator.js');
  return import('../dist/cli.js');
}

entry.main(argv).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    console.error(err instanceof Error ? err.stack ?? err.message : String(err));
    process.exit(1);
  },
);
