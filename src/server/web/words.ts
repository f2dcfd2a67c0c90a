/**
 * Lifecycle events in the words a user knows: a "computer" rather than a sandbox being provisioned,
 * what an exit code means rather than the number, why a turn stopped rather than its stop reason.
 */

type Data = Record<string, unknown> | null;

const str = (d: Data, k: string): string | null => {
  const v = d?.[k];
  return typeof v === 'string' && v !== '' ? v : null;
};

/** What a process exit status says, for the codes people meet (signals are 128 + n). */
export function exitMeaning(code: number): string {
  switch (code) {
    case 0:
      return 'finished normally';
    case 1:
      return 'stopped with an error';
    case 2:
      return 'was started the wrong way';
    case 126:
      return 'could not be run (not executable)';
    case 127:
      return 'was not found';
    case 130:
      return 'was interrupted (Ctrl-C)';
    case 137:
      return 'was killed (out of memory, or stopped by force)';
    case 139:
      return 'crashed';
    case 143:
      return 'was stopped';
    default:
      return code > 128 ? `was stopped by signal ${code - 128}` : `stopped with error status ${code}`;
  }
}

/** Replaces "exited with code N" in an error text with what N means. */
export const explainExits = (text: string): string =>
  text.replace(
    /\b(exited|exit) (?:with )?(?:code|status) (\d+)\b/gi,
    (_m, _w: string, n: string) => `${exitMeaning(Number(n))} (exit status ${n})`,
  );

const REASONS: Readonly<Record<string, string>> = {
  idle: 'it was idle',
  max_lifetime: 'it reached its maximum lifetime',
  runner_offline: 'its runner went offline',
  runner_reconnect: 'its runner came back',
  peer_down: 'the agent stopped unexpectedly',
  fresh_session: 'the agent could not pick up the previous session',
  fresh_sandbox: 'the previous computer was gone',
};

const reason = (d: Data): string | null => {
  const r = str(d, 'reason') ?? str(d, 'error') ?? str(d, 'message');
  return r ? explainExits(REASONS[r] ?? r) : null;
};

export function turnInWords(state: string, data: unknown): string {
  const d = (data && typeof data === 'object' ? data : null) as Data;
  const stop = str(d, 'stop_reason');
  switch (state) {
    case 'done':
      if (stop === 'max_tokens') return 'Answer cut short: it reached the length limit';
      if (stop === 'max_turn_requests') return 'Stopped: too many steps in one turn';
      return 'Done';
    case 'interrupted':
      return 'Interrupted';
    case 'failed':
      if (stop === 'refusal' || str(d, 'reason') === 'stop reason refusal') return 'The model declined to answer';
      return `This turn failed${reason(d) ? `: ${reason(d)}` : ''}`;
    default:
      return state;
  }
}

export function stageInWords(stage: string, state: string, data: unknown): string {
  const d = (data && typeof data === 'object' ? data : null) as Data;
  const why = reason(d);
  const event = str(d, 'event');
  switch (`${stage}/${state}`) {
    case 'provision/started':
      return 'Starting a computer for the agent…';
    case 'provision/done':
      return 'Computer ready';
    case 'provision/failed':
      return `Could not start a computer${why ? `: ${why}` : ''}`;
    case 'sandbox/done':
      if (event === 'resumed') return 'Computer woken up';
      if (event === 'suspended')
        return `Computer put to sleep${why ? ` because ${why}` : ''}; the next message wakes it`;
      if (event === 'reclaimed')
        return `Computer removed${why ? ` because ${why}` : ''}; the next message starts a fresh one`;
      if (event === 'restored') return 'Computer restored from its checkpoint';
      if (event === 'moved') {
        const to = d && typeof d.to === 'object' && d.to ? (d.to as Record<string, unknown>) : null;
        const name =
          typeof to?.runner_name === 'string' && to.runner_name ? `runner ${to.runner_name}` : 'its new place';
        return `Moved to ${name}; the next message starts its computer there from the checkpoint`;
      }
      return 'Computer updated';
    case 'fork/done': {
      const n = d && typeof d.from_turn_number === 'number' ? d.from_turn_number : null;
      return `Forked from another conversation${n ? ` after turn ${n}` : ''}: the history above is a copy, and its computer starts from that point`;
    }
    case 'connection/started':
      return 'Lost the connection to the runner; waiting for it to come back…';
    case 'connection/done':
      return str(d, 'outcome') === 'session_attached'
        ? 'Runner back; the agent carried on'
        : `Runner back${why ? ` (${why})` : ''}`;
    case 'reattach/done':
      return 'Reconnected to the running agent';
    case 'reattach/failed':
      return `Could not reconnect to the running agent${why ? `: ${why}` : ''}`;
    case 'session/started':
      if (event === 'load_delayed') return "Waiting for the minute to turn before reloading the agent's session…";
      return str(d, 'detail') ? `Restarting the agent: ${str(d, 'detail')}` : 'Restarting the agent…';
    case 'session/done':
      return `The agent started afresh${str(d, 'detail') ? `: ${str(d, 'detail')}` : ''}`;
    case 'terminate/done':
      return event === 'released'
        ? 'This conversation was handed over to a new one'
        : 'Conversation ended; its computer was removed';
    case 'network/failed':
      return `Network access refused${why ? `: ${why}` : ''}`;
    case 'push/done': {
      const n = d && typeof d.commits === 'number' ? d.commits : 0;
      return `Pushed ${n === 1 ? '1 commit' : `${n} commits`} to the new branch ${str(d, 'branch') ?? ''}`;
    }
    default:
      return state === 'failed' ? `Something went wrong${why ? `: ${why}` : ''}` : `${stage}: ${state}`;
  }
}

/** A place in the capacity queue: "queued — 2nd in line". */
export function inLine(position: number): string {
  const teen = position % 100 >= 11 && position % 100 <= 13;
  const suffix = teen ? 'th' : (({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[position % 10] ?? 'th');
  return `queued — ${position}${suffix} in line`;
}
