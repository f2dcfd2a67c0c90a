/**
 * The runner wire protocol shared by the server end and the daemon.
 * Imports only zod.
 */
export * from './ops.ts';
export * from './frames.ts';
export * from './codec.ts';
export * from './depth.ts';
