/**
 * The GVC alias used when a `gvc` record carries none: 13 lowercase alphanumerics derived from the
 * GVC name alone, so every process, run and version computes the same host names for it.
 *
 *   alias(name) = base36( int(first 16 bytes of SHA-256(UTF-8 name)) mod 36^13 ), left-padded with `0`
 *
 * The function is part of the configuration contract: changing it renames every endpoint of every
 * GVC without an explicit alias, so it must never change (a test pins known values). Pure.
 */
import { createHash } from 'node:crypto';

const ALIAS_LENGTH = 13;
const MODULUS = 36n ** BigInt(ALIAS_LENGTH);

export const ALIAS_PATTERN = /^[a-z0-9]{13}$/;

export function generatedAlias(gvcName: string): string {
  const digest = createHash('sha256').update(gvcName, 'utf8').digest('hex');
  const value = BigInt(`0x${digest.slice(0, 32)}`) % MODULUS;
  return value.toString(36).padStart(ALIAS_LENGTH, '0');
}

/** The GVC's alias: the one it was given, else the generated one. */
export function gvcAlias(gvcName: string, given: unknown): string {
  return typeof given === 'string' && ALIAS_PATTERN.test(given) ? given : generatedAlias(gvcName);
}
