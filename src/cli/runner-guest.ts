/**
 * `fountain runner-guest`: the agent a microVM's init starts. Serves /home/sprite over vsock
 * (through socat), a virtio-serial port (QEMU), or a unix socket, until SIGINT or SIGTERM.
 */
import { isAbsolute } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { realpathSync } from 'node:fs';
import { RUNNER_SELF_ENV } from '../runner/backends/process/env.ts';
import { startGuest } from '../runner/guest/index.ts';
import type { GuestListen } from '../runner/guest/index.ts';
import { LOG_LEVELS, createLogger } from './log.ts';

const absolute = (flag: string) => z.string().refine((p) => isAbsolute(p), `${flag} must be an absolute path`);

const flagsSchema = z
  .object({
    root: absolute('--root'),
    port: z.coerce.number({ message: '--port must be a number' }).int().min(1).max(0xffffffff),
    listen: absolute('--listen').optional(),
    serial: absolute('--serial').optional(),
    socat: z.string().min(1),
    logLevel: z.enum(LOG_LEVELS, { message: `--log-level must be one of ${LOG_LEVELS.join(', ')}` }),
  })
  .refine((f) => !(f.listen && f.serial), '--listen and --serial exclude each other');

export function register(program: Command): void {
  program
    // Internal: the microVM image runs it; a user never does.
    .command('runner-guest', { hidden: true })
    .description('Inside a microVM: serve /home/sprite to the runner daemon (vsock port 1024 by default)')
    .option('--root <dir>', 'directory holding the sandbox "sprite"', '/home')
    .option('--port <n>', 'vsock port to listen on', '1024')
    .option('--listen <socket>', 'serve on this unix socket instead of vsock')
    .option(
      '--serial <device>',
      'serve on this virtio-serial port instead of vsock (QEMU), e.g. /dev/virtio-ports/fountain',
    )
    .option('--socat <path>', 'socat binary that bridges vsock to the agent (Node has no AF_VSOCK)', 'socat')
    .option('--log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`, 'info')
    .action(async (_opts: unknown, cmd: Command) => {
      const parsed = flagsSchema.safeParse(cmd.opts());
      if (!parsed.success) {
        process.stderr.write(`fountain runner-guest: ${parsed.error.issues[0]?.message ?? 'invalid flags'}\n`);
        process.exit(2);
      }
      const f = parsed.data;
      const listen: GuestListen = f.listen
        ? { kind: 'unix', path: f.listen }
        : f.serial
          ? { kind: 'serial', path: f.serial }
          : { kind: 'vsock', port: f.port, socat: f.socat };
      const logger = createLogger(f.logLevel, 'fountain-runner-guest');
      // The guest's sandboxes start the demo agent through this install (the image's bundle), as a
      // runner's do through its own: the server's paths do not exist inside the VM.
      if (process.argv[1])
        process.env[RUNNER_SELF_ENV] = JSON.stringify([process.execPath, realpathSync(process.argv[1])]);
      const agent = await startGuest({ root: f.root, listen, logger });
      if (!agent.ok) {
        process.stderr.write(`fountain runner-guest: ${agent.error}\n`);
        process.exit(1);
      }
      let stopping = false;
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) process.exit(130);
        stopping = true;
        logger.info({ signal }, 'runner-guest: stopping sessions');
        void agent.value.stop().then(() => {
          logger.flush();
          process.exit(0);
        });
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    });
}
