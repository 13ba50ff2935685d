/**
 * A YAML or JSON parser's error message without the text of the file it quotes. Syntax errors are
 * printed by `svcproxy validate`, logged on a rejected reload and kept for the admin `/config`, and
 * the file may hold secrets (an unquoted `payload: *abc` is read as an alias, and the `yaml`
 * library's message names it; V8's JSON messages quote the text around the error). The line (and
 * for JSON the column) says where the error is, so the quoted text adds nothing a reader needs.
 * Messages that quote nothing pass unchanged. Pure; never throws. Tested by mutating files that hold
 * marker strings (test/security/secrets.test.ts), so a library upgrade with a new quoting message
 * is caught there.
 */

/** The `yaml` library's messages that end in, or embed, text of the file. */
const YAML_QUOTING: readonly (readonly [RegExp, string])[] = [
  // Before the next: its text comes before a quoted copy of it (`Not a YAML token: <text>: "<text>"`).
  [/^Not a YAML token: .*$/s, 'Not a YAML token'],
  // A token the lexer could not place: `Unexpected scalar token in YAML stream: "<its text>"`.
  [/^(.*?): ".*$/s, '$1'],
  [/^(Unresolved alias \(the anchor must be set before the alias\)|Not a valid tag|Could not resolve tag|Unresolved tag|Block scalar header includes extra characters|Ordered maps must not include duplicate keys|Expected a flow scalar value, but found): .*$/s, '$1'],
  [/^(Unsupported YAML version|Unknown directive|Plain value cannot start with|Invalid escape sequence|Unresolved plain scalar) .*$/s, '$1'],
  [/^Verbatim tags aren't resolved, so .* is invalid\.$/s, "Verbatim tags aren't resolved"],
  [/^The .* tag has no suffix$/s, 'A tag has no suffix'],
  [/^.* used for .* collection, but expects .*$/s, 'A tag is used for the wrong kind of node'],
];

export function yamlMessage(message: string): string {
  for (const [re, replacement] of YAML_QUOTING) if (re.test(message)) return message.replace(re, replacement);
  return message;
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
