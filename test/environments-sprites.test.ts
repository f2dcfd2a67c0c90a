/**
 * Agent environments on the `sprites` adapter against the loopback Sprites stub (issue 17): the shared
 * vendor suite of test/helpers/environments.ts; the policy goes through POST /policy/network as
 * allow rules ending in a `*` deny.
 */
import { randomBytes } from 'node:crypto';
import { SpritesAdapter } from '../src/providers/sprites/index.ts';
import { SpritesStub } from './stubs/sprites/server.ts';
import { describeVendorEnvironments } from './helpers/environments.ts';

describeVendorEnvironments('sprites', async () => {
  const token = `spr_env_${randomBytes(8).toString('hex')}`;
  const stub = await SpritesStub.start({ token });
  // An exec WebSocket's URL is the process start: it names the command (and, by design, its env).
  const processStart = (path: string) => /^\/v1\/sprites\/[^/]+\/exec\?/.test(path);
  return {
    adapter: new SpritesAdapter({ token, baseUrl: stub.url }),
    env: { SPRITES_TOKEN: token },
    holds: (name) => stub.status(name) !== null,
    allowList: (name) => stub.rules(name),
    expectedAllowList: [
      { domain: 'localhost', action: 'allow' },
      { domain: 'registry.npmjs.org', action: 'allow' },
      { domain: '*', action: 'deny' },
    ],
    refusingPolicy: (fn) => {
      stub.faults.refusePolicy = 1;
      return fn();
    },
    requestsBesidesProcessStarts: () => JSON.stringify(stub.requests.filter((r) => !processStart(r.path))),
    stop: () => stub.close(),
  };
});
