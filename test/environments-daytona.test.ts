/**
 * Agent environments on the `daytona` adapter against the loopback Daytona stub (issue 17): the shared
 * vendor suite of test/helpers/environments.ts; the policy goes through POST /network-settings, and a
 * Tier 1/2 organisation's 400 is the network step's failure.
 */
import { randomBytes } from 'node:crypto';
import { DaytonaAdapter } from '../src/providers/daytona/adapter.ts';
import { DaytonaStub } from './stubs/daytona/server.ts';
import { describeVendorEnvironments } from './helpers/environments.ts';

describeVendorEnvironments('daytona', async () => {
  const key = `dtn_env_${randomBytes(8).toString('hex')}`;
  const stub = await DaytonaStub.start({ apiKey: key });
  const adapter = new DaytonaAdapter({ apiKey: key, apiUrl: stub.apiUrl, pollIntervalMs: 20, statePollMs: 10 });
  // Commands reach Daytona in these bodies only: the one-shot execute and a session's exec.
  const processStart = (path: string) => /\/process\/execute$|\/process\/session\/[^/]+\/exec$/.test(path);
  return {
    adapter,
    env: { DAYTONA_API_KEY: key },
    holds: (name) => stub.sandbox(name) !== undefined,
    allowList: (name) => {
      const s = stub.sandbox(name);
      return s && { domainAllowList: s.domainAllowList, egress: s.egress };
    },
    expectedAllowList: { domainAllowList: 'localhost,registry.npmjs.org', egress: 'lists' },
    refusingPolicy: async (fn) => {
      // A Tier 1/2 organisation cannot override egress per sandbox: 400 "Network access is restricted…".
      stub.tier = 1;
      try {
        return await fn();
      } finally {
        stub.tier = 3;
      }
    },
    requestsBesidesProcessStarts: () => JSON.stringify(stub.requests.filter((r) => !processStart(r.path))),
    stop: () => stub.stop(),
  };
});
