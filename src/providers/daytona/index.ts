/**
 * The Daytona provider: adapter, configuration and the API client.
 * Nothing here registers itself; the CLI wires the adapter into a ProviderRegistry.
 */
export { DaytonaAdapter, networkSettingsFor, FOUNTAIN_LABELS } from './adapter.ts';
export type { DaytonaHandlePrivate } from './adapter.ts';
export { daytonaOptionsFromEnv, DEFAULT_API_URL } from './config.ts';
export type { DaytonaOptions, ConfigError } from './config.ts';
