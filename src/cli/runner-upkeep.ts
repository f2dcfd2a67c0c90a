/**
 * What an installed runner does beside serving: says when its session count changes, restarts into a
 * newly installed version once no session runs, and, with --auto-update, installs the server's version.
 */
import { basename } from 'node:path';
import type { Logger } from 'pino';
import type { Backend } from '../runner/backend.ts';
import {
  UpdateError,
  currentVersion,
  fetchManifest,
  installArtifact,
  ownVersionDir,
  planUpdate,
  runnerInstallDir,
} from './runner-install.ts';
import { runnerVersion } from './runner-version.ts';

/** The exit code asking the launcher to start `current` again (EX_TEMPFAIL). */
export const RESTART_EXIT_CODE = 75;

export interface UpkeepOptions {
  readonly backend: Backend;
  readonly logger: Logger;
  readonly baseUrl: string;
  readonly autoUpdate: boolean;
  /** How often the installed `current` and the session count are looked at. */
  readonly checkMs: number;
  /** How often --auto-update asks the server for its manifest, besides at each connection. */
  readonly autoUpdateMs: number;
  /** Stops the daemon and exits with RESTART_EXIT_CODE. */
  readonly restart: (into: string) => void;
}

export interface Upkeep {
  /** Called when the daemon's socket opens: an auto-updating runner asks the server for its version. */
  readonly connected: () => void;
  readonly stop: () => void;
}

export function startUpkeep(o: UpkeepOptions): Upkeep {
  const own = ownVersionDir();
  const ownVersion = own ? basename(own) : null;
  // A start with no sessions says nothing; each change after it does.
  let lastCount = 0;
  let checking = false;
  let restarting = false;

  const tick = () => {
    const count = o.backend.liveSessions?.();
    if (count !== undefined && count !== lastCount) {
      lastCount = count;
      o.logger.info({ count }, 'runner: sessions');
    }
    // A runner started from a checkout has no installed versions to move between.
    if (!ownVersion || restarting) return;
    const current = currentVersion();
    if (current === null || current === ownVersion) return;
    if (count === undefined) return;
    if (count > 0) return;
    restarting = true;
    o.logger.info({ version: current }, 'runner: restarting into the installed update');
    o.restart(current);
  };

  const check = async (why: string) => {
    if (!o.autoUpdate || !ownVersion || checking || restarting) return;
    checking = true;
    try {
      const manifest = await fetchManifest(o.baseUrl);
      const installed = currentVersion() ?? runnerVersion();
      const plan = planUpdate(installed, manifest.version, false);
      if (plan.kind === 'downgrade_refused') o.logger.warn({ why }, `runner: auto-update: ${plan.message}`);
      if (plan.kind !== 'install') return;
      await installArtifact(manifest, runnerInstallDir());
      o.logger.info(
        { version: manifest.version, why },
        'runner: auto-update installed the server’s version; restarting into it once no session runs',
      );
      tick();
    } catch (e) {
      o.logger.warn({ err: e instanceof UpdateError ? e.message : String(e) }, 'runner: auto-update check failed');
    } finally {
      checking = false;
    }
  };

  const ticker = setInterval(tick, o.checkMs);
  const poller = o.autoUpdate ? setInterval(() => void check('periodic'), o.autoUpdateMs) : null;
  ticker.unref();
  poller?.unref();
  tick();
  return {
    connected: () => void check('connected'),
    stop: () => {
      clearInterval(ticker);
      if (poller) clearInterval(poller);
    },
  };
}
