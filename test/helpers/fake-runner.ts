/**
 * A real server's API called with its bootstrap key, and a FakeDaemon dialing its runner endpoint
 * with that key, reporting the capabilities given. Tests only.
 */
import pino from 'pino';
import { FakeDaemon } from '../../src/providers/runner/fake-daemon.ts';
import type { RunnerTestHub } from '../../src/providers/runner/test-hub.ts';
import { until } from '../../src/server/conversations/testing.ts';
import type { RunningServer } from '../../src/server/start.ts';
import { call, type Json } from './http.ts';

const logger = pino({ level: 'silent' });

/** The server's public API with its bootstrap key. */
export const callAs = (srv: RunningServer, method: string, path: string, body?: unknown) =>
  call(srv.url, srv.bootstrapKey!, method, path, body);

/** Resolves once the server lists the runner online. */
export async function dialFake(
  srv: RunningServer,
  name: string,
  capabilities?: readonly string[],
): Promise<FakeDaemon> {
  const hub: RunnerTestHub = {
    url: `${srv.url.replace(/^http/, 'ws')}/api/runners/ws`,
    host: srv.host,
    enroll: () => {},
    accepted: [],
    close: async () => {},
  };
  const d = new FakeDaemon(
    {
      runnerId: name,
      name,
      hub,
      logger,
      reconnect: false,
      headers: { authorization: `Bearer ${srv.bootstrapKey}` },
      ...(capabilities ? { capabilities } : {}),
    },
    hub,
    false,
  );
  await d.dial();
  await until(
    async () =>
      ((await callAs(srv, 'GET', '/api/runners')).body.data as Json[]).some((r) => r.name === name && r.online),
    `runner ${name} online`,
  );
  return d;
}
