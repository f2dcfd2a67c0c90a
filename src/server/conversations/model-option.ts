/**
 * Choosing the agent's model through ACP: when an adapter offers a `model` config option
 * (claude-agent-acp, opencode) that lists the agent's model exactly, and another is current, the
 * engine sets it with `session/set_config_option`. Anything fuzzier is left to the runtime's own
 * env or config (delivery.ts), which names the exact model id: an alias such as `sonnet` would
 * let the runtime pick its own model.
 */
import type { SessionConfigOption } from '@agentclientprotocol/sdk';

/** The value to set, or null when the option is absent, already current, or does not list the model. */
export function modelOptionToSet(
  options: readonly SessionConfigOption[] | null | undefined,
  model: string,
  modelId: string,
): string | null {
  const opt = options?.find((o) => o.id === 'model' || o.category === 'model');
  if (!opt || opt.type !== 'select') return null;
  const values = opt.options.flatMap((o) => ('options' in o ? o.options : [o])).map((o) => o.value);
  const wanted = [modelId, model].find((v) => values.includes(v));
  if (!wanted || opt.currentValue === wanted) return null;
  return wanted;
}
