/**
 * Conformance group "Identity" (tests 1–3): handles, and capabilities that follow from the parts.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { CAPABILITIES } from '../capabilities.ts';
import type { SuiteContext } from './context.ts';
import { isResult } from './context.ts';
import { partCapabilities } from '../adapter.ts';
import { partsAgree } from './optional-parts.ts';
import { check } from './define.ts';

export const identityGroup = (ctx: SuiteContext): void => {
  describe('identity', () => {
    check(ctx, '1. build_handle is pure and provider-tagged', async () => {
      const a = ctx.adapter;
      const name = ctx.name();
      const h1 = a.buildHandle(name);
      const h2 = a.buildHandle(name);
      assert.equal(h1.provider, a.provider);
      assert.equal(h1.name, name);
      assert.deepEqual({ provider: h2.provider, name: h2.name }, { provider: h1.provider, name: h1.name });
      // Pure: building a handle must not bring a sandbox into existence.
      const listed = await a.lifecycle.listAllNames();
      if (listed.ok) assert.ok(!listed.value.includes(name), 'build_handle created a sandbox');
      const got = await a.lifecycle.get(h1);
      assert.ok(isResult(got) && !got.ok && got.error.code === 'not_found', `get after build_handle: ${inspect(got)}`);
    });

    check(ctx, '2. capabilities() is a subset of the known set', async () => {
      const caps = ctx.caps();
      for (const c of caps)
        assert.ok((CAPABILITIES as readonly string[]).includes(c), `unknown capability ${String(c)}`);
      assert.ok(caps.size <= CAPABILITIES.length);
    });

    check(ctx, '3. the capabilities follow from the parts the adapter has', async () => {
      partsAgree(ctx);
      const h = await ctx.sandbox();
      const fromParts = partCapabilities(ctx.adapter);
      for (const c of ctx.caps(h)) assert.ok(fromParts.has(c), `${c} offered for a sandbox without its part`);
    });
  });
};
