/**
 * zod schemas for the Daytona replies the adapter reads (control API and toolbox).
 * Loose on purpose: unknown fields and future states pass, the fields we rely on are checked.
 */
import { z } from 'zod';

/** Lifecycle states in Daytona's Sandbox DTO; kept open because new ones appear between releases. */
export const SandboxState = z.string();

export const SandboxDto = z.looseObject({
  id: z.string().min(1),
  name: z.string().optional(),
  state: SandboxState.optional(),
  desiredState: z.string().optional(),
  errorReason: z.string().nullable().optional(),
  toolboxProxyUrl: z.string().optional(),
  snapshot: z.string().nullable().optional(),
  labels: z.record(z.string(), z.string()).nullable().optional(),
  networkBlockAll: z.boolean().optional(),
  networkAllowList: z.string().nullable().optional(),
  domainAllowList: z.string().nullable().optional(),
  autoStopInterval: z.number().optional(),
});
export type SandboxDto = z.infer<typeof SandboxDto>;

/** `GET /sandbox` is paginated now; older APIs answered with a bare array. */
export const SandboxPage = z.union([
  z.looseObject({ items: z.array(SandboxDto), nextCursor: z.string().nullable().optional() }),
  z.array(SandboxDto).transform((items) => ({ items, nextCursor: null })),
]);

export const ExecuteReply = z.looseObject({
  exitCode: z.number().int(),
  result: z.string().optional().default(''),
});

export const SessionExecReply = z.looseObject({ cmdId: z.string().min(1) });

export const CommandDto = z.looseObject({
  id: z.string().min(1),
  command: z.string().optional().default(''),
  exitCode: z.number().int().nullable().optional(),
});
export type CommandDto = z.infer<typeof CommandDto>;

export const SessionDto = z.looseObject({
  sessionId: z.string().min(1),
  commands: z.array(CommandDto).nullable().optional(),
});
export type SessionDto = z.infer<typeof SessionDto>;

export const SessionList = z.array(SessionDto);

export const HomeDirReply = z.looseObject({ dir: z.string().min(1) });
