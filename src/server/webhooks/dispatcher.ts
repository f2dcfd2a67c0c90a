/**
 * Sends due deliveries: each claimed with a lease (one node at a time), POSTed signed, its attempt
 * recorded with status, latency and the start of the answer, then delivered, retried later or failed.
 */
import type { Logger } from 'pino';
import type { Private } from '../../sandbox/private.ts';
import { open } from '../credentials/sealing.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { MAX_ATTEMPTS } from './kinds.ts';
import { signWebhook } from './signature.ts';
import {
  type Claimed,
  claimDue,
  type EndpointRow,
  endpointsByIds,
  markEndpointFailure,
  markEndpointSuccess,
  recordAttempt,
} from './store.ts';

export interface DispatchConfig {
  readonly retryDelaysMs: readonly number[];
  readonly leaseMs: number;
  readonly requestTimeoutMs: number;
  readonly disableAfterMs: number;
  readonly batch: number;
}

export const secretAad = (accountId: string, endpointId: string): string => `webhook:${accountId}:${endpointId}`;

const EXCERPT = 512;

export class Dispatcher {
  readonly #db: EngineDb;
  readonly #key: Private<Buffer>;
  readonly #log: Logger;
  readonly #config: DispatchConfig;
  readonly #onDisabled: (endpoint: EndpointRow, reason: string) => void;

  constructor(deps: {
    db: EngineDb;
    key: Private<Buffer>;
    logger: Logger;
    config: DispatchConfig;
    onDisabled: (endpoint: EndpointRow, reason: string) => void;
  }) {
    this.#db = deps.db;
    this.#key = deps.key;
    this.#log = deps.logger;
    this.#config = deps.config;
    this.#onDisabled = deps.onDisabled;
  }

  /** One round: claims what is due and sends it; how many were sent. */
  async round(): Promise<number> {
    const claimed = await claimDue(this.#db, this.#config.batch, this.#config.leaseMs);
    if (claimed.length === 0) return 0;
    const endpoints = new Map(
      (await endpointsByIds(this.#db, [...new Set(claimed.map((c) => c.endpointId))])).map((e) => [e.id, e]),
    );
    await Promise.all(claimed.map((c) => this.#send(c, endpoints.get(c.endpointId))));
    return claimed.length;
  }

  async #send(c: Claimed, endpoint: EndpointRow | undefined): Promise<void> {
    if (!endpoint || !endpoint.enabled) {
      await recordAttempt(
        this.#db,
        { deliveryId: c.id, statusCode: null, error: 'the endpoint is disabled', latencyMs: 0, responseExcerpt: null },
        { delivered: false, retryAt: null },
      );
      return;
    }
    const secret = open(this.#key, endpoint.secretSealed, secretAad(endpoint.accountId, endpoint.id));
    if (secret === null) {
      await recordAttempt(
        this.#db,
        {
          deliveryId: c.id,
          statusCode: null,
          error: "the endpoint's secret does not open with this server's key",
          latencyMs: 0,
          responseExcerpt: null,
        },
        { delivered: false, retryAt: null },
      );
      return;
    }
    const body = JSON.stringify(c.payload);
    const timestamp = Math.floor(Date.now() / 1000);
    const t0 = performance.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    let excerpt: string | null = null;
    try {
      const res = await fetch(endpoint.url, {
        method: 'POST',
        redirect: 'manual',
        signal: AbortSignal.timeout(this.#config.requestTimeoutMs),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Fountain-Webhooks/1',
          'x-fountain-event': c.eventKind,
          'x-fountain-event-id': c.eventId,
          'x-fountain-delivery': c.id,
          'x-fountain-timestamp': String(timestamp),
          'x-fountain-signature': signWebhook(secret, timestamp, body),
        },
        body,
      });
      statusCode = res.status;
      excerpt = (await res.text()).slice(0, EXCERPT);
    } catch (e) {
      const err = e as Error & { cause?: { code?: string } };
      error =
        err.name === 'TimeoutError'
          ? `no answer within ${this.#config.requestTimeoutMs} ms`
          : `${err.cause?.code ?? err.name}: ${err.message}`.slice(0, EXCERPT);
    }
    const latencyMs = Math.round(performance.now() - t0);
    const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const delay = this.#config.retryDelaysMs[c.attempt - 1];
    const retryAt = !delivered && c.attempt < MAX_ATTEMPTS && delay !== undefined ? new Date(Date.now() + delay) : null;
    await recordAttempt(
      this.#db,
      { deliveryId: c.id, statusCode, error, latencyMs, responseExcerpt: excerpt },
      delivered ? { delivered: true } : { delivered: false, retryAt },
    );
    if (delivered) {
      await markEndpointSuccess(this.#db, endpoint.id);
      return;
    }
    this.#log.info(
      { endpoint: endpoint.id, delivery: c.id, attempt: c.attempt, status: statusCode, error },
      retryAt ? 'webhook delivery failed; retrying later' : 'webhook delivery failed for good',
    );
    const mark = await markEndpointFailure(this.#db, endpoint.id, this.#config.disableAfterMs);
    if (mark?.disabled) this.#onDisabled(endpoint, `every delivery failed since ${mark.failingSince.toISOString()}`);
  }
}
