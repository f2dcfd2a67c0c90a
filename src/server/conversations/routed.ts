/**
 * The turn commands (prompt, interrupt, permission answer) routed to the node that drives their
 * conversation: one wrapper around this node's own commands, built with the engine when nodes share a database.
 */
import { z } from 'zod';
import { liveOwnerOf } from '../cluster/store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { answerOf, type EngineCommand, type OwnerLink } from './commands.ts';
import type { EngineResult } from '../core/engine-errors.ts';
import type { TurnImage } from '../store/conversation-schema.ts';

/** How long a node waits for the node driving a conversation to answer an interrupt or a permission answer. */
const COMMAND_TIMEOUT_MS = 30_000;
const PromptAcceptedSchema = z.object({
  turnId: z.string(),
  queue: z.object({ position: z.number().int(), expiresAt: z.string() }).optional(),
});

/** A prompt's answer: its turn, and its place in line when it waits for capacity. */
export type PromptAccepted = z.infer<typeof PromptAcceptedSchema>;
const NothingSchema = z.undefined();

/** What a client asks of a conversation's turn, wherever the conversation is driven. */
export interface TurnCommands {
  prompt(
    accountId: string,
    id: string,
    text: string,
    images?: readonly TurnImage[],
  ): Promise<EngineResult<PromptAccepted>>;
  interrupt(accountId: string, id: string): Promise<EngineResult<void>>;
  /** Starts a turn the capacity queue admitted (its row holds capacity as `pending`). */
  startAdmitted(accountId: string, id: string, turnId: string): Promise<EngineResult<void>>;
  answerPermission(accountId: string, id: string, requestId: string, optionId: string): Promise<EngineResult<void>>;
}

export interface Routes {
  readonly db: EngineDb;
  readonly link: OwnerLink;
  readonly nodeId: string;
  readonly nodeExpiryMs: number;
  /** Waking a parked sandbox may install the agent first: a routed prompt waits that much longer. */
  readonly installTimeoutMs: number;
  /** True while this node runs the conversation's agent: its commands stay here. */
  readonly drives: (conversationId: string) => boolean;
}

/**
 * A command for a conversation another live node drives goes to that node, and its answer is ours;
 * otherwise (this node drives it, or nobody alive does) this node's own command runs.
 */
export class RoutedEngine implements TurnCommands {
  constructor(
    private readonly here: TurnCommands,
    private readonly routes: Routes,
  ) {}

  async prompt(
    accountId: string,
    id: string,
    text: string,
    images: readonly TurnImage[] = [],
  ): Promise<EngineResult<PromptAccepted>> {
    const timeoutMs = Math.max(COMMAND_TIMEOUT_MS, this.routes.installTimeoutMs + COMMAND_TIMEOUT_MS);
    const away = await this.#away(
      id,
      { op: 'prompt', accountId, conversationId: id, text, images: [...images] },
      PromptAcceptedSchema,
      timeoutMs,
    );
    return away ?? this.here.prompt(accountId, id, text, images);
  }

  async interrupt(accountId: string, id: string): Promise<EngineResult<void>> {
    const away = await this.#away(id, { op: 'interrupt', accountId, conversationId: id }, NothingSchema);
    return away ?? this.here.interrupt(accountId, id);
  }

  async startAdmitted(accountId: string, id: string, turnId: string): Promise<EngineResult<void>> {
    const timeoutMs = Math.max(COMMAND_TIMEOUT_MS, this.routes.installTimeoutMs + COMMAND_TIMEOUT_MS);
    const away = await this.#away(id, { op: 'start', accountId, conversationId: id, turnId }, NothingSchema, timeoutMs);
    return away ?? this.here.startAdmitted(accountId, id, turnId);
  }

  async answerPermission(
    accountId: string,
    id: string,
    requestId: string,
    optionId: string,
  ): Promise<EngineResult<void>> {
    const away = await this.#away(
      id,
      { op: 'answer', accountId, conversationId: id, requestId, optionId },
      NothingSchema,
    );
    return away ?? this.here.answerPermission(accountId, id, requestId, optionId);
  }

  /** The owner's answer, or null when this node handles the command. */
  async #away<T>(
    id: string,
    command: EngineCommand,
    valueSchema: z.ZodType<T>,
    timeoutMs = COMMAND_TIMEOUT_MS,
  ): Promise<EngineResult<T> | null> {
    const { db, link, nodeId, nodeExpiryMs, drives } = this.routes;
    if (drives(id)) return null;
    const owner = await liveOwnerOf(db, id, { self: nodeId, expiryMs: nodeExpiryMs });
    if (!owner) return null;
    return answerOf(await link.request(owner, command, timeoutMs), valueSchema);
  }
}

/** What this node does with a command another node routed to it: the same as if a client had sent it here. */
export function serveCommand(here: TurnCommands, command: EngineCommand): Promise<EngineResult<unknown>> {
  switch (command.op) {
    case 'prompt':
      return here.prompt(command.accountId, command.conversationId, command.text, command.images ?? []);
    case 'interrupt':
      return here.interrupt(command.accountId, command.conversationId);
    case 'start':
      return here.startAdmitted(command.accountId, command.conversationId, command.turnId);
    case 'answer':
      return here.answerPermission(command.accountId, command.conversationId, command.requestId, command.optionId);
  }
}
