// Owns the one shape a counter of outcomes is exported in: `<name>{<label>="<value>"}`, every value known
// up front shown at 0 from the start (a grep or an alert finds a series that has not happened yet).
import { Counter, type Registry } from 'prom-client';

export function outcomeCounter<L extends string = 'outcome'>(
  registry: Registry,
  name: string,
  values: readonly string[],
  help: string,
  label: L = 'outcome' as L,
): Counter<L> {
  const counter = new Counter<L>({ name, help, labelNames: [label], registers: [registry] });
  for (const v of values) counter.inc({ [label]: v } as Partial<Record<L, string>>, 0);
  return counter;
}
