#!/usr/bin/env node
// The installed entry point: runs the compiled CLI (`npm ci` builds dist/ through the prepare script).
// V8's settings (dist/v8-flags.js) are applied before the program's modules are even loaded, so
// nothing the program allocates is subject to the settings it turns off.
await import('../dist/v8-flags.js');
// glibc malloc's thresholds (dist/allocator.js), raised before the program allocates anything.
await import('../dist/allocator.js');
const { main } = await import('../dist/cli.js');

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    console.error(err instanceof Error ? err.stack ?? err.message : String(err));
    process.exit(1);
  },
);
