/**
 * Conformance group "Identity" (contract §10.2 tests 1–3): handles, capabilities, public URL.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { CAPABILITIES } from '../capabilities.ts';
import type { SuiteContext } from './context.ts';
import { isResult, unwrap } from './context.ts';
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
      const listed = await a.listAllNames();
      if (listed.ok) assert.ok(!listed.value.includes(name), 'build_handle created a sandbox');
      const got = await a.get(h1);
      assert.ok(isResult(got) && !got.ok && got.error.code === 'not_found', `get after build_handle: ${inspect(got)}`);
    });

    check(ctx, '2. capabilities() is a subset of the known set', async () => {
      const caps = ctx.caps();
      for (const c of caps)
        assert.ok((CAPABILITIES as readonly string[]).includes(c), `unknown capability ${String(c)}`);
      assert.ok(caps.size <= CAPABILITIES.length);
    });

    check(ctx, '3. public_url agrees with the capability', async () => {
      const h = await ctx.sandbox();
      const res = await ctx.adapter.publicUrl(h);
      assert.ok(isResult(res));
      const advertised = ctx.caps(h).has('public_url');
      if (res.ok && res.value.kind === 'url') {
        assert.ok(advertised, 'a URL was returned but public_url is not advertised');
        assert.match(res.value.url, /^http/);
      } else if (res.ok) {
        assert.ok(!advertised, 'unsupported while public_url is advertised');
      }
      // Other errors are tolerated (contract §10.2 test 3).
      unwrap(await ctx.adapter.get(h), 'get');
    });
  });
};
