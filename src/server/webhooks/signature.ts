/**
 * The `X-Fountain-Signature` of a delivery: HMAC-SHA256 with the endpoint's secret over
 * `<timestamp>.<body>`, as `v1=<hex>`; receivers check it in constant time and refuse old timestamps.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;

export function signWebhook(secret: string, timestamp: number, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** What a receiver does (docs/webhooks.md has it for copying): true when the signature is the secret's and fresh. */
export function verifyWebhook(
  secret: string,
  headers: { signature: string | undefined; timestamp: string | undefined },
  body: string,
  opts: { now?: number; toleranceSeconds?: number } = {},
): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || !headers.signature) return false;
  const now = Math.floor((opts.now ?? Date.now()) / 1000);
  if (Math.abs(now - ts) > (opts.toleranceSeconds ?? 300)) return false;
  const want = Buffer.from(signWebhook(secret, ts, body));
  const got = Buffer.from(headers.signature);
  return want.length === got.length && timingSafeEqual(want, got);
}
