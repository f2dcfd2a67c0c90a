/**
 * The event kinds an account can subscribe a webhook to, and the retry schedule of a delivery: eight
 * attempts spread over about a day, after which the delivery is failed and kept for redelivery.
 */
export const WEBHOOK_EVENT_KINDS = [
  'conversation.created',
  'turn.ended',
  'permission.requested',
  'conversation.failed',
  'runner.offline',
] as const;
export type WebhookEventKind = (typeof WEBHOOK_EVENT_KINDS)[number];

export const MAX_ATTEMPTS = 8;

/** The wait after failed attempt n (1-based) before attempt n + 1: 1 min … 12 h, ~22.6 h in all. */
export const RETRY_DELAYS_MS: readonly number[] = [
  60_000, 300_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000,
];

/** An endpoint every delivery of which failed for this long is disabled, with a notice on it. */
export const DISABLE_AFTER_MS = 3 * 24 * 3_600_000;
