/**
 * Watching configuration paths for changes, shared by the config store and the rate-limit service.
 * The folders holding the given files (or the given folders themselves) are watched, not the files,
 * so a file replaced by rename (editors, config managers, Kubernetes ConfigMap `..data` swaps) is
 * seen. A folder that cannot be watched is logged and skipped: SIGHUP still reloads.
 */
import { statSync, watch as watchFs, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';
import { isConfigFileName } from './load.js';

/** File names a watched folder's events are for; `all` for a folder given as a path. */
type Interest = Set<string> | 'all';

/** Folder → what in it matters: a folder path's config files, or a file path's own name. */
function watchTargets(paths: readonly string[]): Map<string, Interest> {
  const targets = new Map<string, Interest>();
  for (const path of paths) {
    const isDir = statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
    if (isDir) {
      targets.set(path, 'all');
      continue;
    }
    const dir = dirname(path);
    const interest = targets.get(dir) ?? new Set<string>();
    if (interest !== 'all') interest.add(basename(path));
    targets.set(dir, interest);
  }
  return targets;
}

/**
 * Whether a folder event concerns the configuration. Names starting with `..` are Kubernetes'
 * atomic-writer swaps (`..data`), which replace every file of a mounted ConfigMap at once; an event
 * without a name (some platforms) could be anything.
 */
function isRelevant(interest: Interest, name: string | null): boolean {
  if (name === null || name.startsWith('..')) return true;
  return interest === 'all' ? isConfigFileName(name) : interest.has(name);
}

/** Calls `onChange` for every relevant event (callers debounce); returns the watchers to close. */
export function watchConfigPaths(paths: readonly string[], onChange: () => void, logger: Logger, what = 'configuration'): FSWatcher[] {
  const watchers: FSWatcher[] = [];
  for (const [dir, interest] of watchTargets(paths)) {
    try {
      const watcher = watchFs(dir, (_event, name) => {
        if (isRelevant(interest, name)) onChange();
      });
      watcher.on('error', (err) => logger.warn({ err, dir }, `${what} watch failed`));
      watchers.push(watcher);
    } catch (err) {
      logger.warn({ err, dir }, `cannot watch the ${what} folder; reload with SIGHUP`);
    }
  }
  return watchers;
}
