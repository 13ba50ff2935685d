/**
 * The `yaml` library, loaded the first time it is needed: it is 72 modules, and most starts never
 * use it (record files go through config/yaml-fast.ts, rules and `--output yaml` are rare).
 */
import { createRequire } from 'node:module';

type YamlLib = typeof import('yaml');

let lib: YamlLib | undefined;

export function yamlLib(): YamlLib {
  return (lib ??= createRequire(import.meta.url)('yaml') as YamlLib);
}
