/**
 * Comparing our minimal protos with Envoy's originals, as package definitions from
 * @grpc/proto-loader: every message, field, nested type and enum value we declare must be Envoy's
 * (name, number, type, label); Envoy may declare more.
 */
import type { Test } from 'tap';

interface Field { name: string; number: number; type: string; label: string; typeName: string }
interface EnumValue { name: string; number: number }
interface Descriptor { name: string; field?: Field[]; nestedType?: Descriptor[]; enumType?: { name: string; value: EnumValue[] }[]; value?: EnumValue[] }
type Definitions = Record<string, { format?: string; type?: Descriptor }>;

const last = (typeName: string): string => typeName.split('.').pop() ?? '';

/** Our values, and Envoy's values of the same names (or all of Envoy's, with `exact`). */
function enumPairs(ours: EnumValue[], envoy: EnumValue[], exact: boolean): [unknown, unknown] {
  const pick = exact ? envoy : envoy.filter((v) => ours.some((w) => w.name === v.name));
  return [ours.map((v) => [v.name, v.number]), pick.map((v) => [v.name, v.number])];
}

function compareMessage(t: Test, name: string, a: Descriptor, b: Descriptor): void {
  for (const f of a.field ?? []) {
    const g = (b.field ?? []).find((x) => x.name === f.name);
    if (!g) {
      t.fail(`${name}.${f.name} is not in Envoy's ${name}`);
      continue;
    }
    t.same({ number: f.number, type: f.type, label: f.label, typeName: last(f.typeName) }, { number: g.number, type: g.type, label: g.label, typeName: last(g.typeName) }, `${name}.${f.name}`);
  }
  for (const n of a.nestedType ?? []) {
    const m = (b.nestedType ?? []).find((x) => x.name === n.name);
    if (!m) t.fail(`${name}.${n.name} is not in Envoy's ${name}`);
    else compareMessage(t, `${name}.${n.name}`, n, m);
  }
  for (const e of a.enumType ?? []) {
    const f = (b.enumType ?? []).find((x) => x.name === e.name);
    if (!f) t.fail(`${name}.${e.name} is not in Envoy's ${name}`);
    else t.same(...enumPairs(e.value, f.value, false), `${name}.${e.name} values`);
  }
}

/** Checks every `envoy.*` type of ours against Envoy's; returns how many were compared. */
export function compareWithEnvoy(t: Test, oursDef: unknown, envoyDef: unknown, opts: { exactEnums?: boolean } = {}): number {
  const ours = oursDef as Definitions;
  const envoy = envoyDef as Definitions;
  let checked = 0;
  for (const [name, def] of Object.entries(ours)) {
    if (!name.startsWith('envoy.') || !def.type || !def.format) continue;
    const other = envoy[name];
    if (!other?.type) {
      t.fail(`${name} does not exist in Envoy's protos`);
      continue;
    }
    if (def.format.includes('EnumDescriptorProto')) t.same(...enumPairs(def.type.value!, other.type.value!, opts.exactEnums ?? false), `${name} values`);
    else compareMessage(t, name, def.type, other.type);
    checked++;
  }
  return checked;
}
