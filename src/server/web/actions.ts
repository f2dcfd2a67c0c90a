/**
 * What the web pages ask the engine to do, with each refusal turned into a sentence a person can act on
 * (the page shows it next to the button that caused it).
 */
import type { EngineError, EngineErrorCode } from '../core/engine-errors.ts';
import { ENGINE_ERROR_STATUS } from '../core/engine-errors.ts';
import type { WebDeps } from './context.ts';
import { currentConversation } from './roster.ts';
import type { TeamService } from '../team/service.ts';

export type ActionResult<T> = ({ ok: true } & T) | { ok: false; status: number; message: string };

const WORDS: Partial<Record<EngineErrorCode, string>> = {
  conversation_busy: 'It is still working on the previous message. Wait for the answer, or interrupt it.',
  no_runner_online:
    'No runner is connected, so there is nowhere to run this. Start one with `fountain runner` on a machine you own.',
  runner_offline: 'Its machine is offline. The message can be sent once the runner reconnects.',
  provisioning: 'Its computer is still starting. Try again in a few seconds.',
  sandbox_probe_failed: 'The sandbox provider could not be reached. Nothing changed; try again shortly.',
  sandbox_provider_disabled:
    "The agent's sandbox provider is not configured on this server. Edit the agent and pick another.",
  conversation_terminated: 'This conversation has ended. A message on the Team page starts a new one.',
  no_turn_running: 'Nothing is running, so there is nothing to interrupt.',
  permission_request_resolved: 'This request was already answered, timed out, or its turn ended.',
  unknown_option: 'That is not one of the offered answers.',
  no_agent: "This conversation's agent was deleted.",
};

/** A refusal that names the runner it waits for says which one, as the API and the CLI do. */
function sentence(e: EngineError): string {
  const runner = e.extras?.runner_name;
  if (e.code === 'runner_offline' && typeof runner === 'string' && runner !== '') {
    return `Its runner ${JSON.stringify(runner)} is offline. Try again once it reconnects (\`fountain runner --name ${runner}\` on that machine).`;
  }
  // Its words name the runtime; the check's style starts them in lower case.
  if (
    e.code === 'image_not_supported_by_runtime' ||
    e.code === 'model_not_for_runtime' ||
    e.code === 'model_not_allowed'
  )
    return `${e.message.charAt(0).toUpperCase()}${e.message.slice(1)}.`;
  return WORDS[e.code] ?? e.message;
}

export const inWords = (e: EngineError): { ok: false; status: number; message: string } => ({
  ok: false,
  status: e.status ?? ENGINE_ERROR_STATUS[e.code] ?? 400,
  message: sentence(e),
});

/** The team-page message: into the teammate's current conversation, or a fresh one if it has none live. */
export async function messageTeammate(
  deps: WebDeps,
  accountId: string,
  agentId: string,
  prompt: string,
): Promise<ActionResult<{ conversationId: string }>> {
  const current = currentConversation(await deps.engine.list(accountId, { agentId }));
  if (!current || current.status === 'terminated' || current.status === 'failed') {
    const created = await deps.engine.create(accountId, { agentId, prompt });
    return created.ok ? { ok: true, conversationId: created.value.id } : inWords(created.error);
  }
  const sent = await deps.engine.prompt(accountId, current.id, prompt);
  return sent.ok ? { ok: true, conversationId: current.id } : inWords(sent.error);
}

/** A team member's message: into its team conversation (a finished one is replaced), as the team API does. */
export async function messageMember(
  team: TeamService,
  accountId: string,
  agentId: string,
  prompt: string,
): Promise<ActionResult<{ conversationId: string }>> {
  const sent = await team.message(accountId, agentId, prompt);
  return sent.ok ? { ok: true, conversationId: sent.value.conversationId } : inWords(sent.error);
}
