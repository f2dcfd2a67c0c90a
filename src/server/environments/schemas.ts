/**
 * The zod schemas of environments, their secrets, and the skills and MCP servers of agents
 *: what the API accepts and returns, and the OpenAPI components they become.
 */
import { z } from '@hono/zod-openapi';
import { NETWORKING_TYPES } from '../store/environment-schema.ts';
import { SANDBOX_HOME } from '../../sandbox/home.ts';

/** A variable or secret name a shell and a process environment both accept. */
export const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const varName = z
  .string()
  .regex(VAR_NAME, 'must be a variable name: letters, digits and _, not starting with a digit')
  .refine((k) => !k.toUpperCase().startsWith('FOUNTAIN_'), 'FOUNTAIN_* names are reserved for the sandbox token');
const varValue = z.string().max(32_768, 'values are limited to 32 KiB');

const aptName = z.string().regex(/^[a-z0-9][a-z0-9+.-]{0,127}(=[A-Za-z0-9.+:~-]{1,64})?$/, 'not an apt package name');
// Anything npm install accepts as a spec (name@range, a tarball path or URL), but never an option.
const npmSpec = z.string().regex(/^[^\s-][^\s'"`$\\;&|<>]{0,299}$/, 'not an npm package spec');

/** A DNS name or `*.name`, as every network_policy backend takes it. */
const host = z
  .string()
  .max(253)
  .regex(
    /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    'must be a domain name or *.domain (lowercase, no scheme or port)',
  );

/** Under the sandbox home (absolute or relative to it), with no `..` to climb out. */
const mountPath = z
  .string()
  .min(1)
  .max(500)
  .refine((p) => !p.split('/').includes('..'), 'must not contain ..')
  .refine((p) => !p.startsWith('/') || p.startsWith(`${SANDBOX_HOME}/`), `must be under ${SANDBOX_HOME}`)
  .refine((p) => /^[A-Za-z0-9._/-]+$/.test(p), 'may hold only letters, digits and . _ / -');

const gitRef = z
  .string()
  .max(200)
  .regex(/^[A-Za-z0-9._/-]+$/, 'must match [A-Za-z0-9._/-]+')
  .refine((r) => !r.startsWith('-'), 'must not start with -');

export const RepositorySchema = z
  .object({
    url: z
      .string()
      .max(2000)
      .url('must be a URL')
      .refine((u) => u.startsWith('https://'), 'only https:// repositories are cloned')
      .refine((u) => {
        try {
          const p = new URL(u);
          return p.username === '' && p.password === '';
        } catch {
          return false;
        }
      }, 'put the token in a secret and name it in secret_key, not in the URL'),
    mount_path: mountPath.optional(),
    ref: gitRef.optional(),
    secret_key: varName.optional(),
  })
  .strict()
  .openapi('Repository');

export const PackagesSchema = z
  .object({ apt: z.array(aptName).max(100).default([]), npm: z.array(npmSpec).max(100).default([]) })
  .strict()
  .openapi('Packages');

export const SkillSchema = z
  .union([
    z
      .object({
        name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'skill names are lowercase letters, digits and . _ -'),
        content: z.string().min(1).max(200_000),
      })
      .strict(),
    z
      .object({
        source: z.string().regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'source must be owner/repo'),
        ref: gitRef.optional(),
        name: z
          .string()
          .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/)
          .optional(),
      })
      .strict(),
  ])
  .openapi('Skill', { description: 'Inline {name, content} or GitHub-sourced {source: "owner/repo", ref?, name?}' });

/**
 * A map keyed by variable names. Keys are checked here rather than by a key schema, whose failure
 * zod reports only as "Invalid key in record": this names the key and what is wrong with it.
 */
function varMap(value: z.ZodString, max: number) {
  return z.record(z.string(), value).superRefine((m, ctx) => {
    const keys = Object.keys(m);
    if (keys.length > max) ctx.addIssue({ code: 'custom', message: `at most ${max} entries` });
    for (const k of keys) {
      const r = varName.safeParse(k);
      if (!r.success)
        ctx.addIssue({
          code: 'custom',
          path: [k],
          message: `${k}: ${r.error.issues[0]?.message ?? 'not a variable name'}`,
        });
    }
  });
}

const stringMap = (max: number) => varMap(z.string().max(8192), max);

/**
 * An MCP server's url may hold `${VAR}` anywhere (a port, the whole base), as Claude's .mcp.json
 * allows: it must be an http(s) URL once each reference stands for some value, or start with one.
 */
const mcpUrl = z
  .string()
  .min(1)
  .max(2000)
  .refine((u) => {
    if (/^\$\{[A-Za-z_][A-Za-z0-9_]*\}/.test(u)) return !/\s/.test(u);
    try {
      const p = new URL(u.replace(/\$\{[A-Za-z_][A-Za-z0-9_]*\}/g, '1'));
      return (p.protocol === 'http:' || p.protocol === 'https:') && !/\s/.test(u);
    } catch {
      return false;
    }
  }, 'must be an http(s) URL (a ${VAR} may stand for any part)');

export const McpServerSchema = z
  .union([
    z
      .object({
        command: z.string().min(1).max(1000),
        args: z.array(z.string().max(4096)).max(100).optional(),
        env: stringMap(100).optional(),
      })
      .strict(),
    z
      .object({
        type: z.enum(['http', 'sse']),
        url: mcpUrl,
        headers: z
          .record(z.string().regex(/^[A-Za-z0-9-]{1,100}$/, 'not a header name'), z.string().max(8192))
          .optional(),
      })
      .strict(),
  ])
  .openapi('McpServer', {
    description: 'Claude-shaped: {command, args, env} or {type: http|sse, url, headers}; ${VAR} resolved at provision',
  });

export const McpServersSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'MCP server names are letters, digits, _ and -'), McpServerSchema)
  .refine((m) => Object.keys(m).length <= 50, 'at most 50 MCP servers');

export const SkillsSchema = z.array(SkillSchema).max(50);

const envVars = varMap(varValue, 200);
const secretsIn = varMap(varValue, 200);

const NetworkingConfig = z.object({ allowed_hosts: z.array(host).max(200).default([]) }).strict();

export const EnvironmentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    packages: z.object({ apt: z.array(z.string()), npm: z.array(z.string()) }),
    env_vars: z.record(z.string(), z.string()),
    /** Names only: values are write-only. */
    secret_keys: z.array(z.string()),
    setup_script: z.string(),
    networking_type: z.enum(NETWORKING_TYPES),
    networking_config: z.object({ allowed_hosts: z.array(z.string()) }),
    repositories: z.array(
      z.object({
        url: z.string(),
        mount_path: z.string(),
        ref: z.string().optional(),
        secret_key: z.string().optional(),
      }),
    ),
    checkpoint_id: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    inserted_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Environment');

const fields = {
  name: z.string({ error: 'name is required' }).trim().min(1, 'name is required').max(200),
  description: z.string().max(10_000),
  packages: PackagesSchema,
  env_vars: envVars,
  secrets: secretsIn.openapi({
    description: 'Write-only: stored sealed, delivered to the agent process environment only',
  }),
  setup_script: z.string().max(100_000),
  networking_type: z.enum(NETWORKING_TYPES, { error: 'networking_type must be unrestricted or limited' }),
  networking_config: NetworkingConfig,
  repositories: z.array(RepositorySchema).max(20),
  checkpoint_id: z.string().max(200).nullable(),
  metadata: z.record(z.string(), z.unknown()),
};

export const EnvironmentCreateBody = z
  .object({
    ...fields,
    description: fields.description.default(''),
    packages: PackagesSchema.default({ apt: [], npm: [] }),
    env_vars: envVars.default({}),
    secrets: fields.secrets.default({}),
    setup_script: fields.setup_script.default(''),
    networking_type: fields.networking_type.default('unrestricted'),
    networking_config: NetworkingConfig.default({ allowed_hosts: [] }),
    repositories: fields.repositories.default([]),
    checkpoint_id: fields.checkpoint_id.default(null),
    metadata: fields.metadata.default({}),
  })
  .strict()
  .openapi('EnvironmentCreate');

export const EnvironmentPatchBody = z.object(fields).partial().strict().openapi('EnvironmentUpdate');

export const SecretKeyParams = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' } }),
  key: z
    .string()
    .max(200)
    .openapi({ param: { name: 'key', in: 'path' } }),
});

export const SecretBody = z.object({ value: varValue }).strict().openapi('SecretValue');
export const SecretKeyName = varName;

export const SecretListSchema = z
  .object({ key: z.string(), inserted_at: z.string(), updated_at: z.string() })
  .openapi('SecretName');

/** Launch-attached secrets on POST /api/conversations. */
export const LaunchSecretsSchema = secretsIn.openapi({
  description: "Write-only; win over the environment's secrets on collision",
});
