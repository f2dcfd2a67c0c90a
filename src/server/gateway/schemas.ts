/**
 * The API's words for the gateway: an agent's credential delivery and model limits, the account's
 * limits, and the usage and audit answers.
 */
import { z } from '@hono/zod-openapi';
import { ModelLimitsSchema } from './limits.ts';
import { CREDENTIAL_DELIVERIES } from './reach.ts';

export const ModelLimitsApi = ModelLimitsSchema.openapi('ModelLimits', {
  description:
    'What the model gateway holds calls to (absent: no limit). Tokens count input, output and cache reads and writes; days and months are UTC.',
  example: { tokens_per_day: 2_000_000, requests_per_minute: 60, models: ['anthropic/claude-sonnet-4-5'] },
});

export const GatewayAgentFields = {
  credential_delivery: z.enum(CREDENTIAL_DELIVERIES).openapi({
    description:
      '"gateway" (default): the runtime reaches its model through this server\'s model gateway with the conversation\'s sandbox token, and the real key never enters the sandbox. "direct": the key is put in the agent process\'s environment.',
  }),
  model_limits: ModelLimitsApi,
};
