/**
 * The `custom` runtime: any agent that speaks ACP on stdio, launched by the command its agent row names,
 * optionally installed first (npm `name@version` or an apt package), with its env and named credentials.
 */
import { z } from '@hono/zod-openapi';
import { CREDENTIAL_PROVIDERS, isCredentialProvider } from '../credentials/providers.ts';
import { VAR_NAME } from '../environments/schemas.ts';
import type { CustomRuntime } from '../store/conversation-schema.ts';

const envName = z
  .string()
  .regex(VAR_NAME, 'must be a variable name: letters, digits and _, not starting with a digit')
  .refine((k) => !k.toUpperCase().startsWith('FOUNTAIN_'), 'FOUNTAIN_* names are reserved for Fountain');

/** `name@version` (a scope allowed), never an option, a path or a URL: the install is pinned. */
const NPM_PIN = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*@[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$/;
const APT_NAME = /^[a-z0-9][a-z0-9+.-]{0,127}(=[A-Za-z0-9.+:~-]{1,64})?$/;

const CustomInstallSchema = z
  .union([
    z.object({ npm: z.string().regex(NPM_PIN, 'install.npm must be an npm package pinned as name@version') }).strict(),
    z.object({ apt: z.string().regex(APT_NAME, 'install.apt must be an apt package name') }).strict(),
  ])
  .nullable()
  .openapi({ description: 'What is installed before the first launch: {"npm": "name@version"} or {"apt": "name"}' });

const CustomCredentialSchema = z
  .object({
    provider: z.enum(CREDENTIAL_PROVIDERS, {
      error: `credentials[].provider must be one of ${CREDENTIAL_PROVIDERS.join(', ')}`,
    }),
    env: envName.openapi({ description: 'The env variable the agent reads the key from' }),
    base_url_env: envName.optional().openapi({
      description:
        "The env variable the agent reads its API's base URL from; under gateway delivery the gateway's URL for that API",
    }),
  })
  .strict();

export const CustomRuntimeSchema = z
  .object({
    command: z
      .array(z.string().min(1, 'command arguments must not be empty').max(4096))
      .min(1, 'custom_runtime.command must not be empty: give the argv that starts the agent')
      .max(64)
      .openapi({
        description: 'The argv that starts the agent; it speaks ACP on stdin/stdout',
        example: ['my-agent', '--acp'],
      }),
    install: CustomInstallSchema.default(null),
    env: z.record(envName, z.string().max(8192)).default({}),
    credentials: z.array(CustomCredentialSchema).max(8).default([]),
  })
  .strict()
  .openapi('CustomRuntime', {
    description:
      'The launch of a runtime: custom agent: its command, an optional package to install first, its env, and the inference credentials it gets as which env variable',
  });

/** Null when the custom launch fits its delivery, else why not (the field and the fix). */
export function customRuntimeProblem(custom: CustomRuntime, delivery: 'gateway' | 'direct'): string | null {
  const envs = new Set<string>();
  for (const [i, c] of custom.credentials.entries()) {
    for (const name of [c.env, c.base_url_env]) {
      if (name === undefined) continue;
      if (envs.has(name) || name in custom.env) return `credentials[${i}]: env variable ${name} is named twice`;
      envs.add(name);
    }
    if (delivery === 'gateway' && !c.base_url_env)
      return `credentials[${i}].base_url_env is required under gateway delivery: the agent must be pointed at Fountain's model gateway (or set credential_delivery to direct)`;
  }
  return null;
}

/** The argv head for messages: what the agent runs. */
export const customLabel = (custom: CustomRuntime | null): string => custom?.command[0] ?? 'custom agent';

/** The stored launch as the API shows it (credentials of a provider this server no longer knows are left out). */
export function customView(c: CustomRuntime | null): z.infer<typeof CustomRuntimeSchema> | null {
  if (!c) return null;
  const credentials = c.credentials.flatMap((k) =>
    isCredentialProvider(k.provider)
      ? [{ provider: k.provider, env: k.env, ...(k.base_url_env ? { base_url_env: k.base_url_env } : {}) }]
      : [],
  );
  return { command: [...c.command], install: c.install, env: { ...c.env }, credentials };
}
