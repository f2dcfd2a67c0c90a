/**
 * The agent fields about how its runtime is launched beyond the runtime table: a custom runtime's
 * command, the ACP session settings its conversations start with, and the credential set it uses.
 */
import { z } from '@hono/zod-openapi';
import { SET_NAME, SET_NAME_RULE } from '../credentials/providers.ts';
import { CustomRuntimeSchema } from './custom-runtime.ts';

export { CustomRuntimeSchema } from './custom-runtime.ts';

export const SessionSettingsSchema = z
  .object({
    options: z
      .record(z.string().min(1).max(100), z.string().min(1).max(200))
      .optional()
      .openapi({
        description: 'ACP session config option id → value, sent with session/set_config_option',
        example: { effort: 'high' },
      }),
    mode: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .openapi({ description: 'An ACP session mode id (e.g. plan), sent with session/set_mode', example: 'plan' }),
  })
  .strict()
  .openapi('SessionSettings', {
    description:
      "Session settings: applied when the agent's session starts, where the runtime lists them; one it does not list is refused in words",
  });

export const CredentialSetField = z.string().regex(SET_NAME, SET_NAME_RULE).openapi({
  description: "The account's credential set the agent's runtime gets its model credential from",
  example: 'default',
});

/** The most warm sandboxes one agent may keep (each holds a sandbox and an agent process). */
export const WARM_POOL_MAX = 10;
const WARM_POOL_RULE = `warm_pool must be a whole number from 0 to ${WARM_POOL_MAX}`;

export const WarmPoolField = z
  .number({ error: WARM_POOL_RULE })
  .int(WARM_POOL_RULE)
  .min(0, WARM_POOL_RULE)
  .max(WARM_POOL_MAX, WARM_POOL_RULE)
  .openapi({
    description:
      "Sandboxes kept provisioned, with the agent process initialized, for this agent's next conversations (0: none). They count toward the account's sandbox limit; a changed agent's are replaced.",
    example: 1,
  });

/** The fields, for the create and update bodies (optional there) and the agent's view. */
export const LaunchFields = {
  custom_runtime: CustomRuntimeSchema.nullable().openapi({
    description: 'Required for runtime custom, null otherwise: how the ACP agent is installed and launched',
  }),
  session_settings: SessionSettingsSchema,
  credential_set: CredentialSetField,
};
