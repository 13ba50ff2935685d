#!/usr/bin/env node
// The installed entry point: runs the compiled CLI (`npm ci` builds dist/ through the prepare script).
import { main } from '../dist/cli.js';

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    console.error(err instanceof Error ? err.stack ?? err.message : String(err));
    process.exit(1);
  },
);
