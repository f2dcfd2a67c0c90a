/**
 * Agent environments on the `e2b` adapter against the loopback E2B stub (issue 17): the shared vendor
 * suite of test/helpers/environments.ts, with the policy applied through PUT /network.
 */
import { randomBytes } from 'node:crypto';
import { E2BAdapter, NAME_KEY } from '../src/providers/e2b/index.ts';
import { E2BStub } from './stubs/e2b/server.ts';
import { describeVendorEnvironments } from './helpers/environments.ts';

describeVendorEnvironments('e2b', async () => {
  const key = `e2b_env_${randomBytes(8).toString('hex')}`;
  const stub = await E2BStub.start({ apiKey: key });
  const adapter = new E2BAdapter({
    apiKey: key,
    baseUrl: stub.apiUrl,
    sandboxUrl: stub.sandboxUrl,
    requestTimeoutMs: 30_000,
  });
  const find = (name: string) => stub.list().find((s) => s.metadata[NAME_KEY] === name);
  return {
    adapter,
    env: { E2B_API_KEY: key, E2B_BASE_URL: stub.apiUrl, E2B_SANDBOX_URL: stub.sandboxUrl },
    holds: (name) => find(name) !== undefined,
    allowList: (name) => find(name)?.network?.allowOut,
    expectedAllowList: ['localhost', 'registry.npmjs.org'],
    refusingPolicy: (fn) => {
      // E2B answers 400 to a network configuration it cannot take.
      stub.failNext(
        'api',
        /^\/sandboxes\/[^/]+\/network$/,
        { status: 400, body: { code: 400, message: 'invalid network config' } },
        { method: 'PUT' },
      );
      return fn();
    },
    requestsBesidesProcessStarts: () =>
      JSON.stringify(stub.requests.filter((r) => r.path !== '/process.Process/Start')),
    stop: async () => {
      adapter.close();
      await stub.stop();
    },
  };
});
