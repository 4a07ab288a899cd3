// Owns the one shape a counter of outcomes is exported in: `<name>{<label>="<value>"}`, every value known
// up front shown at 0 from the start (a grep or an alert finds a series that has not happened yet).
import { Counter, type Registry } from 'prom-client';

export function outcomeCounter<L extends string>(
  registry: Registry,
  c: { name: string; help: string; label: L; values: readonly string[] },
): Counter<L> {
  const counter = new Counter<L>({ name: c.name, help: c.help, labelNames: [c.label], registers: [registry] });
  for (const v of c.values) counter.inc({ [c.label]: v } as Partial<Record<L, string>>, 0);
  return counter;
}
