/**
 * The engine's Placement over runners and hosted providers: a runner sandbox's name routes it to a
 * connected runner, and "runner offline / disconnected" is recognised here, not in the engine.
 */
import { RUNNER_DISCONNECTED, RUNNER_OFFLINE, pickRunner, type RunnerHost } from '../../providers/runner/index.ts';
import {
  mintHostedName,
  mintRunnerName,
  parseRunnerName,
  type KnownProvider,
  type SandboxError,
} from '../../sandbox/index.ts';
import { accept, refuse } from '../core/engine-errors.ts';
import type { Placement, RunnerSummary } from '../core/placement.ts';
import type { SandboxRow } from '../store/conversation-schema.ts';

/** How placement reads runner rows (name, hostname, root); the runners store implements it. */
type RunnerRow = { id: string; name: string; hostname: string | null; root: string | null };
export interface RunnerDirectory {
  find(accountId: string, runnerId: string): Promise<RunnerRow | undefined>;
  /** By its name (a move names its target runner either way). */
  findByName?(accountId: string, name: string): Promise<RunnerRow | undefined>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function providerPlacement(host: RunnerHost | null, runners: RunnerDirectory): Placement {
  return {
    async mint(accountId: string, provider: KnownProvider, pin: string | null) {
      if (provider === 'runner') {
        if (pin !== null) {
          // A pin names one runner: it is that one or none, never a silent fallback to another machine.
          if (host?.online(accountId).some((r) => r.runnerId === pin)) {
            const n = mintRunnerName(pin);
            return n.ok ? accept(n.value) : refuse('no_runner_online', `runner id unusable: ${n.error}`);
          }
          const row = await runners.find(accountId, pin);
          if (!row)
            return refuse(
              'runner_deleted',
              'The agent is pinned to a runner that was deleted. Pin it to another runner, or unpin it so any connected runner takes its conversations.',
              { runner_id: pin },
            );
          const name = row.name;
          return refuse(
            'runner_offline',
            `The agent is pinned to runner ${JSON.stringify(name)}, which is not connected. Start it with \`fountain runner\`, or unpin the agent.`,
            {
              runner_id: pin,
              runner_name: row?.name ?? null,
            },
          );
        }
        if (!host) return refuse('no_runner_online', 'No runner is connected. Start one with `fountain runner`.');
        const picked = pickRunner(host, accountId);
        if (!picked.ok)
          return refuse(
            'no_runner_online',
            'No runner is connected. Start one with `fountain runner` on a machine you own.',
          );
        const n = mintRunnerName(picked.value.runnerId);
        return n.ok ? accept(n.value) : refuse('no_runner_online', `runner id unusable: ${n.error}`);
      }
      const n = mintHostedName(accountId);
      return n.ok ? accept(n.value) : refuse('not_found', n.error);
    },
    hostAway: (e: SandboxError) =>
      e.code === 'unavailable' && (e.detail === RUNNER_OFFLINE || e.detail === RUNNER_DISCONNECTED),
    connectionLost: (provider: string, e: SandboxError) =>
      provider === 'runner' && e.code === 'unavailable' && e.detail === RUNNER_DISCONNECTED,
    detachable: (provider: string) => provider === 'runner' && host !== null,
    async hostGone(accountId: string, s: SandboxRow): Promise<boolean> {
      if (s.provider !== 'runner') return false;
      const id = parseRunnerName(s.name);
      return id.ok && (await runners.find(accountId, id.value)) === undefined;
    },
    async runner(accountId: string, ref: string): Promise<RunnerSummary | undefined> {
      const row =
        (UUID.test(ref) ? await runners.find(accountId, ref.toLowerCase()) : undefined) ??
        (await runners.findByName?.(accountId, ref));
      if (!row) return undefined;
      const online = host?.online(accountId).some((r) => r.runnerId === row.id) ?? false;
      return { id: row.id, name: row.name, hostname: row.hostname, root: row.root, online };
    },
    async host(accountId: string, s: SandboxRow): Promise<RunnerSummary | null> {
      if (s.provider !== 'runner') return null;
      const id = parseRunnerName(s.name);
      if (!id.ok) return null;
      const row = await runners.find(accountId, id.value);
      const online = host?.whereis(id.value) !== undefined;
      return { id: id.value, name: row?.name ?? '', hostname: row?.hostname ?? null, root: row?.root ?? null, online };
    },
  };
}
