/**
 * Conformance groups for the optional parts (tests 19–20): network policy and checkpoints. Each
 * runs only against an adapter that has the part, and is reported as skipped, with why, otherwise.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { partCapabilities } from '../adapter.ts';
import type { SuiteContext } from './context.ts';
import { expectCode, expectErr, unwrap } from './context.ts';
import { check, lacksPart } from './define.ts';

export const networkGroup = (ctx: SuiteContext): void => {
  describe('network policy', () => {
    check(ctx, '19. allow: [] is accepted (deny-all), then an allow list replaces it', async (t) => {
      if (lacksPart(t, ctx, 'network')) return;
      const net = ctx.adapter.network!;
      const h = await ctx.sandbox();
      if (!ctx.caps(h).has('network_policy')) {
        // The part exists but this sandbox's backend does not offer it (a runner without confinement).
        expectCode(
          await net.applyNetworkPolicy(h, { allow: [] }),
          'not_supported',
          'apply_network_policy where not offered',
        );
        return;
      }
      unwrap(await net.applyNetworkPolicy(h, { allow: [] }), 'apply_network_policy(allow: [])');
      unwrap(
        await net.applyNetworkPolicy(h, { allow: ['api.example.com'] }),
        'apply_network_policy(allow: [api.example.com])',
      );
    });

    check(ctx, 'a policy for a sandbox that does not exist is an error, never ok', async (t) => {
      if (lacksPart(t, ctx, 'network')) return;
      const ghost = ctx.adapter.buildHandle(ctx.name());
      expectErr(await ctx.adapter.network!.applyNetworkPolicy(ghost, { allow: [] }), 'apply_network_policy(ghost)');
    });
  });
};

export const checkpointsGroup = (ctx: SuiteContext): void => {
  describe('checkpoints', () => {
    check(ctx, '20. a checkpoint is created and restored; a restore of an unknown id fails', async (t) => {
      if (lacksPart(t, ctx, 'checkpoints')) return;
      const cp = ctx.adapter.checkpoints!;
      const h = await ctx.sandbox();
      const id = unwrap(await cp.createCheckpoint(h), 'create_checkpoint');
      assert.equal(typeof id, 'string');
      assert.ok(id.length > 0, 'an empty checkpoint id');
      unwrap(await cp.restoreCheckpoint(h, id), 'restore_checkpoint');
      const bad = expectErr(await cp.restoreCheckpoint(h, `${id}-no-such`), 'restore_checkpoint(unknown)');
      assert.ok(bad.code !== 'not_supported', `a checkpoints part cannot answer not_supported: ${inspect(bad)}`);
    });
  });
};

/** The parts decide the capabilities: an optional part and its capability come and go together. */
export const partsAgree = (ctx: SuiteContext): void => {
  const fromParts = partCapabilities(ctx.adapter);
  for (const c of ctx.caps()) assert.ok(fromParts.has(c), `${c} advertised without the part that gives it`);
  assert.equal(fromParts.has('network_policy'), ctx.adapter.network !== undefined);
  assert.equal(fromParts.has('checkpoint'), ctx.adapter.checkpoints !== undefined);
};
