/**
 * The sandbox contract: everything a provider adapter and its callers agree on.
 * This folder imports nothing else from src/.
 */
export * from './result.ts';
export * from './errors.ts';
export * from './private.ts';
export * from './types.ts';
export * from './providers.ts';
export * from './capabilities.ts';
export * from './adapter.ts';
export * from './retry.ts';
export * from './names.ts';
export * from './home.ts';
export * from './lifecycle.ts';
export * from './registry.ts';
