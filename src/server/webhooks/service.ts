/**
 * Signed webhooks of an account: endpoints (URL, secret, event kinds), their deliveries with every
 * attempt, redelivery; and on every node the loop that scans for events and sends what is due.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Private } from '../../sandbox/private.ts';
import type { EventBus } from '../cluster/bus.ts';
import { seal } from '../credentials/sealing.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { type DispatchConfig, Dispatcher, secretAad } from './dispatcher.ts';
import { DISABLE_AFTER_MS, RETRY_DELAYS_MS, type WebhookEventKind } from './kinds.ts';
import { Scanner } from './scanner.ts';
import { newWebhookSecret } from './signature.ts';
import {
  anyEndpoint,
  type AttemptRow,
  type DeliveryRow,
  deleteEndpoint,
  type EndpointRow,
  enqueueEvent,
  findDelivery,
  findEndpoint,
  insertEndpoint,
  insertRedelivery,
  listDeliveries,
  listEndpoints,
  updateEndpoint,
} from './store.ts';

export interface WebhookConfig extends DispatchConfig {
  /** How often each node scans for events and sends what is due. */
  readonly tickMs: number;
  /** How far below its cursor a scan looks again for rows that committed late. */
  readonly lookBackMs: number;
}

export const WEBHOOK_DEFAULTS: WebhookConfig = {
  tickMs: 1000,
  lookBackMs: 30_000,
  retryDelaysMs: RETRY_DELAYS_MS,
  leaseMs: 60_000,
  requestTimeoutMs: 10_000,
  disableAfterMs: DISABLE_AFTER_MS,
  batch: 20,
};

export interface WebhookView {
  readonly id: string;
  readonly url: string;
  readonly events: WebhookEventKind[];
  readonly enabled: boolean;
  readonly disabled_reason: string | null;
  readonly disabled_at: string | null;
  readonly failing_since: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export interface DeliveryView {
  readonly id: string;
  readonly event_id: string;
  readonly event: WebhookEventKind;
  readonly status: DeliveryRow['status'];
  readonly attempts: number;
  readonly next_attempt_at: string | null;
  readonly created_at: string;
  readonly delivered_at: string | null;
  readonly redelivery_of: string | null;
  readonly payload: Record<string, unknown>;
  readonly attempt_log: Array<{
    at: string;
    status_code: number | null;
    error: string | null;
    latency_ms: number;
    response_excerpt: string | null;
  }>;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export const webhookView = (e: EndpointRow): WebhookView => ({
  id: e.id,
  url: e.url,
  events: e.kinds,
  enabled: e.enabled,
  disabled_reason: e.disabledReason,
  disabled_at: iso(e.disabledAt),
  failing_since: iso(e.failingSince),
  created_at: e.createdAt.toISOString(),
  updated_at: e.updatedAt.toISOString(),
});

const deliveryView = (d: DeliveryRow & { attemptLog?: AttemptRow[] }): DeliveryView => ({
  id: d.id,
  event_id: d.eventId,
  event: d.eventKind,
  status: d.status,
  attempts: d.attempts,
  next_attempt_at: d.status === 'pending' ? d.nextAttemptAt.toISOString() : null,
  created_at: d.createdAt.toISOString(),
  delivered_at: iso(d.deliveredAt),
  redelivery_of: d.redeliveryOf,
  payload: d.payload,
  attempt_log: (d.attemptLog ?? []).map((a) => ({
    at: a.attemptedAt.toISOString(),
    status_code: a.statusCode,
    error: a.error,
    latency_ms: a.latencyMs,
    response_excerpt: a.responseExcerpt,
  })),
});

export type WebhookResult<T> = { ok: true; value: T } | { ok: false; code: 'not_found'; message: string };
const missing = (what: string) => ({ ok: false as const, code: 'not_found' as const, message: `${what} not found` });

export class WebhookService {
  readonly #db: EngineDb;
  readonly #key: Private<Buffer>;
  readonly #log: Logger;
  readonly #config: WebhookConfig;
  readonly #scanner: Scanner;
  readonly #dispatcher: Dispatcher;
  readonly #audit: (
    accountId: string,
    action: string,
    subjectId: string,
    data?: Record<string, unknown>,
  ) => Promise<void>;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #unsubscribe: (() => void) | null = null;

  constructor(deps: {
    db: EngineDb;
    key: Private<Buffer>;
    logger: Logger;
    bus: EventBus;
    audit: (accountId: string, action: string, subjectId: string, data?: Record<string, unknown>) => Promise<void>;
    config?: Partial<WebhookConfig>;
  }) {
    this.#db = deps.db;
    this.#key = deps.key;
    this.#log = deps.logger.child({ part: 'webhooks' });
    this.#config = { ...WEBHOOK_DEFAULTS, ...deps.config };
    this.#audit = deps.audit;
    this.#scanner = new Scanner(this.#db, this.#config.lookBackMs);
    this.#dispatcher = new Dispatcher({
      db: this.#db,
      key: this.#key,
      logger: this.#log,
      config: this.#config,
      onDisabled: (endpoint, reason) => {
        this.#log.warn({ endpoint: endpoint.id, account: endpoint.accountId }, 'webhook endpoint disabled');
        void this.#audit(endpoint.accountId, 'webhook.disabled', endpoint.id, { reason }).catch(() => {});
      },
    });
    // Every node hears a runner go offline once; the connection's start names the event, so the nodes
    // that all queue it queue it once.
    this.#unsubscribe = deps.bus.subscribeAll((_topic, event) => {
      if (event.type !== 'runner_offline' || !event.connectedAt) return;
      const eventId = `runner_${event.runnerId}_offline_${Date.parse(event.connectedAt)}`;
      enqueueEvent(this.#db, {
        accountId: event.accountId,
        eventId,
        kind: 'runner.offline',
        payload: {
          id: eventId,
          type: 'runner.offline',
          created_at: new Date().toISOString(),
          account_id: event.accountId,
          data: { runner_id: event.runnerId, name: event.name },
        },
      }).catch((e: unknown) => this.#log.warn({ err: String(e) }, 'could not queue a runner.offline webhook'));
    });
  }

  start(): void {
    if (this.#timer) return;
    const tick = () => {
      this.#running = this.#round().finally(() => {
        this.#running = null;
        if (this.#timer) this.#timer = setTimeout(tick, this.#config.tickMs);
      });
    };
    this.#timer = setTimeout(tick, this.#config.tickMs);
  }

  async stop(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    await this.#running;
  }

  async #round(): Promise<void> {
    try {
      const endpoints = await anyEndpoint(this.#db);
      await this.#scanner.scan(Date.now(), endpoints);
      // Sends until nothing is due, so a burst does not wait a tick per batch.
      while (endpoints && (await this.#dispatcher.round()) > 0 && this.#timer) {}
    } catch (e) {
      this.#log.warn({ err: e instanceof Error ? e.message : String(e) }, 'webhook round failed; next tick retries');
    }
  }

  async create(
    accountId: string,
    input: { url: string; events: WebhookEventKind[]; secret?: string | undefined },
  ): Promise<{ webhook: WebhookView; secret: string }> {
    const id = randomUUID();
    const secret = input.secret ?? newWebhookSecret();
    const row = await insertEndpoint(this.#db, {
      id,
      accountId,
      url: input.url,
      kinds: [...new Set(input.events)],
      secretSealed: seal(this.#key, secret, secretAad(accountId, id)),
    });
    await this.#audit(accountId, 'webhook.create', id, { url: input.url, events: row.kinds });
    return { webhook: webhookView(row), secret };
  }

  async list(accountId: string): Promise<WebhookView[]> {
    return (await listEndpoints(this.#db, accountId)).map(webhookView);
  }

  async get(accountId: string, id: string): Promise<WebhookResult<WebhookView>> {
    const row = await findEndpoint(this.#db, accountId, id);
    return row ? { ok: true, value: webhookView(row) } : missing('webhook');
  }

  async update(
    accountId: string,
    id: string,
    patch: { url?: string | undefined; events?: WebhookEventKind[] | undefined; enabled?: boolean | undefined },
  ): Promise<WebhookResult<WebhookView>> {
    const row = await updateEndpoint(this.#db, accountId, id, {
      ...(patch.url !== undefined ? { url: patch.url } : {}),
      ...(patch.events !== undefined ? { kinds: [...new Set(patch.events)] } : {}),
      // Enabling again clears the notice and the failure streak that led to it.
      ...(patch.enabled === true ? { enabled: true, disabledReason: null, disabledAt: null, failingSince: null } : {}),
      ...(patch.enabled === false
        ? { enabled: false, disabledReason: 'disabled by the account', disabledAt: new Date() }
        : {}),
    });
    if (!row) return missing('webhook');
    await this.#audit(accountId, 'webhook.update', id, { fields: Object.keys(patch) });
    return { ok: true, value: webhookView(row) };
  }

  /** A new secret; the old one stops signing at once. */
  async rotateSecret(accountId: string, id: string): Promise<WebhookResult<{ webhook: WebhookView; secret: string }>> {
    const secret = newWebhookSecret();
    const row = await updateEndpoint(this.#db, accountId, id, {
      secretSealed: seal(this.#key, secret, secretAad(accountId, id)),
    });
    if (!row) return missing('webhook');
    await this.#audit(accountId, 'webhook.rotate_secret', id);
    return { ok: true, value: { webhook: webhookView(row), secret } };
  }

  async remove(accountId: string, id: string): Promise<boolean> {
    const gone = await deleteEndpoint(this.#db, accountId, id);
    if (gone) await this.#audit(accountId, 'webhook.delete', id);
    return gone;
  }

  async deliveries(accountId: string, id: string, limit: number): Promise<WebhookResult<DeliveryView[]>> {
    if (!(await findEndpoint(this.#db, accountId, id))) return missing('webhook');
    return { ok: true, value: (await listDeliveries(this.#db, id, limit)).map(deliveryView) };
  }

  async redeliver(accountId: string, id: string, deliveryId: string): Promise<WebhookResult<DeliveryView>> {
    if (!(await findEndpoint(this.#db, accountId, id))) return missing('webhook');
    const of = await findDelivery(this.#db, id, deliveryId);
    if (!of) return missing('delivery');
    const again = await insertRedelivery(this.#db, of);
    await this.#audit(accountId, 'webhook.redeliver', id, { delivery: deliveryId });
    return { ok: true, value: deliveryView(again) };
  }
}
