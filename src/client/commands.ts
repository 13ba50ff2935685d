/**
 * The client's commands (words.ts names them), each as its verbs, its help and how a command line
 * becomes a run: the entry (main.ts) finds the command and verb, prints help, reports usage errors,
 * opens the session and runs what `prepare` returned. A new command (phase 2: `quota`, `connect`) is
 * one more entry here and its name in words.ts; a command without verbs (`connect WORKLOAD`) gets
 * its words whole.
 */
import type { ClientArgs } from './args.js';
import type { ClientContext } from './context.js';
import { restHelp } from './help.js';
import { REST_VERBS, restCommand, runRest, type RestVerb } from './rest.js';
import { connectCommand, connectHelp, runConnect } from './connect.js';
import { QUOTA_VERBS, quotaCommand, quotaHelp, runQuota, type QuotaVerb } from './quota.js';
import type { ClientCommand } from './words.js';

export interface ClientCommandSpec {
  /** Its verbs, as `svcproxy COMMAND VERB ...` takes them; none: its words follow the command (`connect W`). */
  readonly verbs?: readonly string[];
  /** Its help, or one verb's. */
  help(verb?: string): string;
  /** The command line after the verb checked (a UsageError otherwise), as the run it asks for. */
  prepare(verb: string, words: readonly string[], args: ClientArgs): (ctx: ClientContext) => Promise<number>;
}

export const COMMAND_SPECS: { readonly [C in ClientCommand]: ClientCommandSpec } = {
  rest: {
    verbs: REST_VERBS,
    help: (verb) => restHelp(verb as RestVerb | undefined),
    prepare: (verb, words, args) => {
      const { path } = restCommand([verb, ...words, ...(args.after ?? [])], args);
      return (ctx) => runRest(ctx, verb as RestVerb, path);
    },
  },
  quota: {
    verbs: QUOTA_VERBS,
    help: (verb) => quotaHelp(verb as QuotaVerb | undefined),
    prepare: (verb, words, args) => {
      const command = quotaCommand(verb as QuotaVerb, [...words, ...(args.after ?? [])], args);
      return (ctx) => runQuota(ctx, command);
    },
  },
  connect: {
    help: () => connectHelp(),
    prepare: (_verb, words, args) => {
      const command = connectCommand(words, args);
      return (ctx) => runConnect(ctx, command);
    },
  },
};
