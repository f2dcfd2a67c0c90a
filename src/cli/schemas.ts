/**
 * The shapes the CLI reads from the public API: only the fields it uses, the rest passes through.
 * Kept loose on purpose so a newer server with more fields still works with an older CLI.
 */
import { z } from 'zod';

export const agentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    runtime: z.string(),
    model: z.string().nullish(),
    sandbox_provider: z.string().nullish(),
    runner_id: z.string().nullish(),
  })
  .loose();
export type Agent = z.infer<typeof agentSchema>;

/** Create and update answers: the agent and what would refuse its conversations at launch (a server of another version may send none). */
export const savedAgentSchema = agentSchema
  .extend({ warnings: z.array(z.object({ code: z.string(), message: z.string() }).loose()).optional() })
  .loose();

export const runnerRefSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    hostname: z.string().nullish(),
    online: z.boolean(),
    path: z.string().nullish(),
  })
  .loose();

export const conversationSchema = z
  .object({
    id: z.string(),
    title: z.string().nullish(),
    first_prompt: z.string().nullish(),
    agent_id: z.string().nullish(),
    status: z.string(),
    turn_count: z.number().optional(),
    queue: z.object({ position: z.number() }).loose().nullish(),
    sandbox: z
      .object({ provider: z.string().nullish(), status: z.string().nullish(), runner: runnerRefSchema.nullish() })
      .loose()
      .nullish(),
    inserted_at: z.string().optional(),
    labels: z.array(z.string()).optional(),
    model: z.string().nullish(),
  })
  .loose();
export type Conversation = z.infer<typeof conversationSchema>;

export const turnSchema = z
  .object({
    id: z.string(),
    turn_number: z.number(),
    prompt: z.string().nullish(),
    status: z.string(),
    queue_position: z.number().nullish(),
    pending_permission: z.object({ request_id: z.string() }).loose().nullish(),
  })
  .loose();

export const logEventSchema = z
  .object({
    kind: z.string(),
    stream: z.string().nullish(),
    data: z.string().nullish(),
    stage: z.string().nullish(),
    state: z.string().nullish(),
    turn_id: z.string().nullish(),
  })
  .loose();
export type LogEvent = z.infer<typeof logEventSchema>;

// The server sends `option_id`; ACP itself spells it `optionId`. Either is accepted.
export const permissionOptionSchema = z
  .object({
    option_id: z.string().optional(),
    optionId: z.string().optional(),
    name: z.string(),
    kind: z.string().nullish(),
  })
  .refine((o) => o.option_id ?? o.optionId, 'an option needs an id')
  .transform((o) => ({ optionId: (o.option_id ?? o.optionId)!, name: o.name, kind: o.kind ?? undefined }));
export const requestStartedSchema = z
  .object({ request_id: z.string(), tool: z.string().nullish(), options: z.array(permissionOptionSchema) })
  .loose();

export const data = <S extends z.ZodType>(s: S) => z.object({ data: s }).loose();

export const environmentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    env_vars: z.record(z.string(), z.string()).optional(),
    secret_keys: z.array(z.string()).optional(),
    networking_type: z.string().optional(),
    networking_config: z
      .object({ allowed_hosts: z.array(z.string()) })
      .loose()
      .optional(),
    packages: z
      .object({ apt: z.array(z.string()), npm: z.array(z.string()) })
      .loose()
      .optional(),
    repositories: z.array(z.object({ url: z.string(), mount_path: z.string().optional() }).loose()).optional(),
  })
  .loose();
export type Environment = z.infer<typeof environmentSchema>;
