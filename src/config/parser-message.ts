/**
 * A YAML or JSON parser's error message without the text of the file it quotes. Syntax errors are
 * printed by `svcproxy validate`, logged on a rejected reload and kept for the admin `/config`, and
 * the file may hold secrets (an unquoted `payload: *abc` is read as an alias, and js-yaml's reason
 * names it, its message quotes the lines around the error; V8's JSON messages quote the text around
 * the error). The line (and for JSON the column) says where the error is, so the quoted text adds
 * nothing a reader needs. Messages that quote nothing pass unchanged. Pure; never throws. Tested by mutating files that hold
 * marker strings (test/security/secrets.test.ts), so a library upgrade with a new quoting message
 * is caught there.
 */

/** js-yaml's reasons that embed text of the file (an alias's or a tag's name), and what replaces them. */
const YAML_QUOTING: readonly (readonly [RegExp, string])[] = [
  [/^(unidentified alias|undeclared tag handle) ".*"$/s, '$1'],
  [/^there is a previously declared suffix for ".*" tag handle$/s, 'there is a previously declared suffix for that tag handle'],
  [/^unknown tag !<.*$/s, 'unknown tag'],
  [/^cannot resolve a node with !<.*> explicit tag$/s, 'cannot resolve a node with its explicit tag'],
  [/^unacceptable node kind for !<.*$/s, 'unacceptable node kind for its tag'],
  [/^(tag name cannot contain such characters|tag name is malformed|tag prefix is malformed): .*$/s, '$1'],
];

/** js-yaml's reason for a syntax error (its `reason`, without the excerpt of `message`), without text of the file. */
export function jsYamlMessage(reason: string): string {
  for (const [re, replacement] of YAML_QUOTING) if (re.test(reason)) return reason.replace(re, replacement);
  return reason;
}

/**
 * V8's `JSON.parse` message without the position (the caller gives line and column) and without
 * what it quotes: `Unexpected token 'x', "...text..." is not valid JSON` names the character and the
 * text around it, which may be the first characters of a secret written without quotes.
 */
export function jsonMessage(message: string): string {
  if (message.startsWith('Unexpected token')) return 'Unexpected character';
  return message
    .replace(/ in JSON at position \d+.*$/s, '')
    .replace(/, (\.\.\.)?".*" is not valid JSON$/s, '')
    .replace(/^".*" is not valid JSON$/s, 'Not valid JSON');
}
