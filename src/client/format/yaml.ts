/**
 * js-yaml, loaded the first time the client needs it (YAML output, a YAML body, an edit): the same
 * library and options the platform's CLI prints and reads with, so both print the same bytes, and a
 * `json` or `text` run never loads it.
 */
import { createRequire } from 'node:module';

type JsYaml = typeof import('js-yaml');

let lib: JsYaml | undefined;

export function jsYaml(): JsYaml {
  return (lib ??= createRequire(import.meta.url)('js-yaml') as JsYaml);
}
