/**
 * The E2B provider: the adapter, its options, and the clients it is built from.
 * Nothing here registers itself; the CLI wires the adapter into the registry.
 */
export { E2BAdapter, LABEL_KEY, NAME_KEY } from './adapter.ts';
export type { E2BTarget } from './adapter.ts';
export type { E2BOptions } from './config.ts';
export { optionsFromEnv, DEFAULT_BASE_URL, DEFAULT_TEMPLATE } from './config.ts';
