/**
 * The one list of sandbox provider names. Schemas, validation, the agent form's select
 * and the boot check derive from it; no other file may spell the list out.
 */
export const KNOWN_PROVIDERS = ['runner', 'e2b', 'daytona', 'sprites'] as const;
export type KnownProvider = (typeof KNOWN_PROVIDERS)[number];

/** `fake` exists for tests only and is never a value an agent can select. */
export type ProviderId = KnownProvider | 'fake';

export const isKnownProvider = (v: unknown): v is KnownProvider =>
  typeof v === 'string' && (KNOWN_PROVIDERS as readonly string[]).includes(v);

/** The environment variable whose presence turns a hosted provider on. */
export const PROVIDER_CREDENTIAL_ENV: Readonly<Record<Exclude<KnownProvider, 'runner'>, string>> = {
  e2b: 'E2B_API_KEY',
  daytona: 'DAYTONA_API_KEY',
  sprites: 'SPRITES_TOKEN',
};
