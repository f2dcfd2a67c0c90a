/**
 * `fountain chat --model`: the new conversation's model, checked before any prompt is read so a typed
 * message is never lost to a refusal the server would give anyway.
 */
import { CliError } from './session.ts';
import type { Conversation } from './schemas.ts';
import { modelProblem, RUNTIME_SPECS } from '../server/runtimes/table.ts';
import type { Runtime } from '../server/store/conversation-schema.ts';

/**
 * `--model` before any prompt is read: it must fit the agent's runtime (as the server checks again), and it
 * is a new conversation's pick, so a conversation continued on another model is refused rather than ignored.
 */
export function checkModel(
  agent: { name: string; runtime: string },
  model: string,
  existing: Conversation | null,
): void {
  const runtime = agent.runtime in RUNTIME_SPECS ? (agent.runtime as Runtime) : 'custom';
  const problem = modelProblem(runtime, model);
  if (problem) throw new CliError(`--model ${model}: ${problem} (agent ${agent.name} runs ${agent.runtime})`);
  if (existing && existing.model != null && existing.model !== model)
    throw new CliError(
      `--model picks a new conversation's model; conversation ${existing.id} runs on ${existing.model} (leave out --continue or --conversation to start one on ${model})`,
    );
}
