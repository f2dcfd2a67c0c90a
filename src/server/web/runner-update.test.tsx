import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Runner } from '../store/schema.ts';
import { toHtml } from './live.ts';
import { RunnerRows, updateAvailable } from './pages/runners.tsx';

const SERVED = '0.2.0+aaaaaaaaaaaa';
const row = (name: string, version: string | null): Runner => ({
  id: `00000000-0000-4000-8000-00000000000${name.length}`,
  accountId: '00000000-0000-4000-8000-000000000000',
  name,
  hostname: name,
  os: 'linux',
  arch: 'amd64',
  version,
  root: '/srv',
  backend: 'process',
  capabilities: ['suspend', 'attach'],
  connectedAt: new Date(),
  lastSeenAt: new Date(),
  createdAt: new Date(),
  updatedAt: new Date(),
});

describe('"update available" on the Runners page', () => {
  it('marks an installed runner whose version differs from the one the server hands out', () => {
    assert.equal(updateAvailable('0.1.0+bbbbbbbbbbbb', SERVED), true);
    assert.equal(updateAvailable(SERVED, SERVED), false);
    // A runner run from a checkout reports the bare package version: it is updated with its checkout.
    assert.equal(updateAvailable('0.1.0', SERVED), false);
    assert.equal(updateAvailable(null, SERVED), false);
    assert.equal(updateAvailable('0.1.0+bbbbbbbbbbbb', null), false);
  });

  it('shows the badge in that runner’s row only', async () => {
    const html = await toHtml(
      <RunnerRows
        runners={[row('old', '0.1.0+bbbbbbbbbbbb'), row('current', SERVED)]}
        online={new Set()}
        loads={new Map()}
        served={SERVED}
      />,
    );
    const rows = html.split('<tr ').slice(1);
    assert.match(rows[0]!, /data-runner="old"[\s\S]*update available/);
    assert.doesNotMatch(rows[1]!, /update available/);
  });
});
