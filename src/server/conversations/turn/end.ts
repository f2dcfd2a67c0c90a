/**
 * The one end of a turn, as the state machine's `end` effect: its held ask closed, its rows settled and
 * its stage event published in one statement (or apart, when that statement fails).
 */
import type { Turn } from '../../store/conversation-schema.ts';
import { ACP_AUTH_REQUIRED, promptFailureReason, RUNTIME_SPECS, SANDBOX_HOME } from '../../runtimes/table.ts';
import { endTurnRows, endTurnRowsWithEvent, type TurnEnd } from '../store.ts';
import { turnUsage } from '../usage.ts';
import type { ActiveTurn, EngineCore, Live } from '../live.ts';
import type { TurnEffect } from './machine.ts';

export async function endTurn(
  c: EngineCore,
  live: Live,
  turn: ActiveTurn,
  fx: Extract<TurnEffect, { type: 'end' }>,
): Promise<void> {
  let r = fx.outcome;
  const refused = r.ok ? turn.refusal.failure : null;
  if (refused)
    r = {
      ok: false,
      error: promptFailureReason(live.runtime, { message: refused, rpc: { code: ACP_AUTH_REQUIRED } }, live.model),
    };
  if (fx.ask) {
    live.resolved.add(fx.ask.requestId);
    c.events.stage(live.conversationId, turn.id, 'permission', 'done', {
      request_id: fx.ask.requestId,
      outcome: 'turn_ended',
      option_id: null,
    });
  }
  if (live.turn === turn) live.turn = null;
  const endedAt = new Date();
  const base = { turn_id: turn.id, turn_number: turn.number };
  const duration = endedAt.getTime() - turn.startedAt;
  let state: 'interrupted' | 'done' | 'failed';
  let data: Record<string, unknown>;
  let patch: Partial<Turn>;
  if (fx.interrupted) {
    state = 'interrupted';
    data = { ...base, ...(r.ok ? { stop_reason: r.stopReason } : {}) };
    patch = { status: 'interrupted', stopReason: r.ok ? r.stopReason : null };
  } else if (r.ok && r.stopReason !== 'refusal' && r.stopReason !== 'cancelled') {
    state = 'done';
    data = { ...base, stop_reason: r.stopReason };
    patch = { status: 'completed', stopReason: r.stopReason };
  } else {
    const reason = r.ok ? `stop reason ${r.stopReason}` : r.error;
    state = 'failed';
    data = { ...base, reason, ...(!r.ok && r.code ? { error: r.code } : {}) };
    patch = { status: 'failed', stopReason: r.ok ? r.stopReason : null, reason };
  }
  const usage = turnUsage(r.ok ? r.usage : undefined, turn.reported);
  if (usage) data.usage = usage;
  // The turn's events are stored before its row says it ended, so a client polling the turn reads
  // the whole answer; the rows settle with the stage event in one statement, so a client acting on
  // the event reads them settled, and it skips the batching delay, since clients wait for it.
  const end: TurnEnd = {
    turnId: turn.id,
    patch: { ...patch, endedAt, pendingPermission: null, ...(usage ? { usage } : {}) },
    conversationId: live.conversationId,
    settle: { lastActiveAt: endedAt, acpNextId: live.proc?.client.nextRequestId ?? null },
    usage: usage ?? null,
  };
  const event = c.events.stageEvent(live.conversationId, turn.id, 'turn', state, data, duration);
  try {
    await c.events.storeWith(() => endTurnRowsWithEvent(c.d.db, end, event));
  } catch (e) {
    // Nothing of that statement was stored: the rows end alone, and the event takes the log's way
    // (a row it cannot store is dropped there, as any event's, instead of keeping the turn open).
    c.log.warn(
      { err: e instanceof Error ? e.message : String(e), conversation: live.conversationId },
      'turn end with its event failed; stored apart',
    );
    await endTurnRows(c.d.db, end);
    c.events.append(event);
    c.events.flushSoon();
  }
  // Off the turn's path: the done event is stored and published already.
  const home = RUNTIME_SPECS[live.runtime].home;
  if (state === 'done' && c.d.checkpoints && home.startsWith(SANDBOX_HOME))
    c.d.checkpoints.afterTurn(
      {
        conversationId: live.conversationId,
        accountId: live.accountId,
        adapter: live.adapter,
        handle: live.handle,
        home,
        cwd: RUNTIME_SPECS[live.runtime].cwd,
        relocateSessions: RUNTIME_SPECS[live.runtime].relocateSessions,
      },
      turn.id,
    );
  if (!live.proc?.alive && c.live.get(live.conversationId) === live) c.live.delete(live.conversationId);
  c.freed();
}
