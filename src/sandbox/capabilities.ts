/**
 * The closed set of capabilities an adapter may advertise, and the check against it.
 * Capabilities are honest: an adapter advertises only what it really does.
 */
export const CAPABILITIES = [
  'suspend',
  'network_policy',
  'checkpoint',
  'attach',
  'tty',
  'public_url',
  'terminate_session',
  'create_new',
  'force_terminate_session',
  'destroy_once',
  'create_checkpoint_once',
] as const;
export type Capability = (typeof CAPABILITIES)[number];

export const isCapability = (v: unknown): v is Capability =>
  typeof v === 'string' && (CAPABILITIES as readonly string[]).includes(v);
