/**
 * Team schedules: every tick each node claims due schedules by compare-and-swap
 * on next_run_at (one queue row per due time), then works the queue with leased rows. A teammate that
 * is busy, still starting or whose machine is offline is retried every `snoozeMs` until `patienceMs`
 * after the due time; any other refusal is final. Several nodes on one database fire each due time once.
 */
import type { Logger } from 'pino';
import { teamTopic, type EventBus } from '../cluster/bus.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { claimFiring, dueSchedules, getScheduleById, leaseRuns, updateRun, updateSchedule } from './store.ts';
import type { Schedule } from '../store/team-schema.ts';
import { next, parseCron } from './cron.ts';
import type { EngineError, EngineErrorCode, EngineResult } from '../core/engine-errors.ts';
import type { Delivery, TeamService } from './service.ts';

export interface SchedulerConfig {
  /** How often due schedules are claimed and the queue worked (upstream: every minute). */
  readonly tickMs: number;
  /** Wait between attempts on a busy, starting or offline teammate (30 s). */
  readonly snoozeMs: number;
  /** How long after the due time a firing keeps trying (30 min). */
  readonly patienceMs: number;
  /** How long a node holds a firing it is delivering before another node may take it over. */
  readonly leaseMs: number;
}

export const SCHEDULER_DEFAULTS: SchedulerConfig = {
  tickMs: 60_000,
  snoozeMs: 30_000,
  patienceMs: 30 * 60_000,
  leaseMs: 10 * 60_000,
};

/** Refusals that mean "not now" rather than "never". */
const SNOOZABLE: ReadonlySet<EngineErrorCode> = new Set([
  'conversation_busy',
  'provisioning',
  'runner_offline',
  'no_runner_online',
]);

const LAST_ERROR_MAX = 250;

/** The `last_error` text for a refusal (the reference's wording where it has one). */
export function lastErrorText(e: EngineError): string {
  switch (e.code) {
    case 'conversation_busy':
      return 'teammate was busy';
    case 'provisioning':
      return "teammate's computer was still starting";
    case 'runner_offline':
    case 'no_runner_online':
      return "teammate's machine is offline";
    case 'sandbox_probe_failed':
      return 'could not reach the sandbox provider';
    case 'not_found':
      return 'agent is not on the team';
    default: {
      const text = `${e.code}: ${e.message}`;
      return text.length > LAST_ERROR_MAX ? `${text.slice(0, LAST_ERROR_MAX - 1)}…` : text;
    }
  }
}

/** When a schedule fires next after `after`; null for an expression that no longer parses. */
export function nextRunAt(cron: string, after: Date): Date | null {
  const c = parseCron(cron);
  return c.ok ? next(c.value, after) : null;
}

export interface SchedulerDeps {
  readonly db: EngineDb;
  readonly team: TeamService;
  readonly bus: EventBus;
  readonly logger: Logger;
  readonly audit: (
    accountId: string,
    action: string,
    subjectId: string,
    data?: Record<string, unknown>,
  ) => Promise<void>;
  readonly config: SchedulerConfig;
}

export class Scheduler {
  readonly #d: SchedulerDeps;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | null = null;
  #ticking: Promise<void> | null = null;
  #stopped = false;

  constructor(deps: SchedulerDeps) {
    this.#d = deps;
    this.#log = deps.logger.child({ component: 'scheduler' });
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(), this.#d.config.tickMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#ticking;
  }

  /** One pass: claim what is due, then deliver what is queued. Never overlaps itself; never throws. */
  tick(now = new Date()): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#ticking) return this.#ticking;
    this.#ticking = (async () => {
      try {
        await this.#claim(now);
        await this.#work();
      } catch (e) {
        this.#log.error({ err: e }, 'scheduler tick failed');
      } finally {
        this.#ticking = null;
      }
    })();
    return this.#ticking;
  }

  changed(s: Pick<Schedule, 'accountId' | 'id'>): void {
    this.#d.bus.publish(teamTopic(s.accountId), { type: 'schedule_changed', accountId: s.accountId, scheduleId: s.id });
  }

  async #claim(now: Date): Promise<void> {
    for (;;) {
      const due = await dueSchedules(this.#d.db, now, 100);
      let claimed = 0;
      for (const s of due) {
        if (this.#stopped) return;
        // Missed due times (the cluster was down) collapse into this one firing.
        const following = nextRunAt(s.cron, now);
        if (await claimFiring(this.#d.db, s, s.nextRunAt!, following, now)) {
          claimed++;
          this.#log.info({ schedule: s.id, firedAt: s.nextRunAt }, 'schedule due');
        }
      }
      if (due.length < 100 || claimed === 0) return;
    }
  }

  async #work(): Promise<void> {
    for (;;) {
      if (this.#stopped) return;
      const now = new Date();
      const runs = await leaseRuns(this.#d.db, now, new Date(now.getTime() + this.#d.config.leaseMs), 20);
      if (runs.length === 0) return;
      for (const run of runs) {
        const s = await getScheduleById(this.#d.db, run.scheduleId);
        if (!s) continue;
        const r = await this.#deliver(s);
        const at = new Date();
        if (r.ok) {
          await updateRun(this.#d.db, run.id, {
            status: 'delivered',
            conversationId: r.value.conversationId,
            error: null,
          });
          await this.#stamp(s, at, r);
          await this.#d.audit(s.accountId, 'team.schedule.fired', s.id, {
            fired_at: run.firedAt.toISOString(),
            conversation_id: r.value.conversationId,
            attempts: run.attempts,
          });
          continue;
        }
        const text = lastErrorText(r.error);
        if (
          SNOOZABLE.has(r.error.code) &&
          at.getTime() + this.#d.config.snoozeMs <= run.firedAt.getTime() + this.#d.config.patienceMs
        ) {
          await updateRun(this.#d.db, run.id, {
            runAfter: new Date(at.getTime() + this.#d.config.snoozeMs),
            error: text,
          });
          this.#log.debug({ schedule: s.id, reason: text }, 'schedule run snoozed');
          continue;
        }
        await updateRun(this.#d.db, run.id, { status: 'given_up', error: text });
        await this.#stamp(s, at, r);
        await this.#d.audit(s.accountId, 'team.schedule.fired', s.id, {
          fired_at: run.firedAt.toISOString(),
          error: text,
          attempts: run.attempts,
        });
        this.#log.info({ schedule: s.id, reason: text }, 'schedule run gave up');
      }
    }
  }

  #deliver(s: Schedule): Promise<EngineResult<Delivery>> {
    return s.oneOff
      ? this.#d.team.fresh(s.accountId, s.agentId, s.name ?? undefined, s.prompt)
      : this.#d.team.message(s.accountId, s.agentId, s.prompt);
  }

  /** Records the outcome on the schedule and tells the team stream. */
  async #stamp(s: Schedule, at: Date, r: EngineResult<Delivery>): Promise<void> {
    await updateSchedule(
      this.#d.db,
      s.id,
      r.ok
        ? { lastRunAt: at, lastConversationId: r.value.conversationId, lastError: null }
        : { lastRunAt: at, lastError: lastErrorText(r.error) },
    );
    this.changed(s);
  }

  /** `POST …/run`: delivers now, outside the queue; last_run_at and last_error are stamped either way. */
  async runNow(s: Schedule): Promise<EngineResult<Delivery>> {
    const r = await this.#deliver(s);
    await this.#stamp(s, new Date(), r);
    await this.#d.audit(
      s.accountId,
      'team.schedule.fired',
      s.id,
      r.ok
        ? { manual: true, conversation_id: r.value.conversationId }
        : { manual: true, error: lastErrorText(r.error) },
    );
    return r;
  }
}
