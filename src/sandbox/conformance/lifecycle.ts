/**
 * Conformance group "Lifecycle": create/adopt, create_new, get,
 * destroy, list, suspend/resume, and a file surviving suspend.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { isTransient } from '../retry.ts';
import { SANDBOX_HOME } from '../home.ts';
import type { SuiteContext } from './context.ts';
import { expectCode, expectErr, text, unwrap, utf8 } from './context.ts';
import { check, lacks } from './define.ts';

export const lifecycleGroup = (ctx: SuiteContext): void => {
  describe('lifecycle', () => {
    check(ctx, '4. create_new returns a fresh instance_id and refuses an existing name', async (t) => {
      if (lacks(t, ctx, 'create_new')) return;
      const a = ctx.adapter;
      assert.equal(typeof a.lifecycle.createNew, 'function', 'create_new advertised but createNew is missing');
      const name = ctx.name();
      const first = unwrap(await a.lifecycle.createNew!(name), 'createNew');
      ctx.track(first);
      assert.equal(first.name, name);
      assert.equal(first.provider, a.provider);
      assert.equal(typeof first.instanceId, 'string');
      assert.ok((first.instanceId ?? '').length > 0, 'instance_id is empty');
      const again = expectErr(await a.lifecycle.createNew!(name), 'second createNew');
      assert.ok(again.code === 'already_exists' || again.code === 'invalid', `second createNew: ${inspect(again)}`);
      assert.ok(!isTransient(again), 'the refusal is permanent');
      unwrap(await a.lifecycle.destroy(first), 'destroy');
      const second = unwrap(await a.lifecycle.createNew!(name), 'createNew after destroy');
      ctx.track(second);
      assert.notEqual(second.instanceId, first.instanceId, 'a re-created instance has a different instance_id');
    });

    check(ctx, '5. create twice adopts; get reports a status', async () => {
      const a = ctx.adapter;
      const name = ctx.name();
      const h1 = unwrap(await a.lifecycle.create(name), 'create');
      ctx.track(h1);
      const h2 = unwrap(await a.lifecycle.create(name), 'create again');
      assert.equal(h1.name, name);
      assert.equal(h2.name, name);
      assert.equal(h1.provider, a.provider);
      const info = unwrap(await a.lifecycle.get(h2), 'get');
      assert.ok(['running', 'suspended', 'unknown'].includes(info.status), `status ${inspect(info.status)}`);
      assert.equal(typeof info.raw, 'object');
    });

    check(ctx, '6. get on a never-created name is exactly not_found', async () => {
      const h = ctx.adapter.buildHandle(ctx.name());
      expectCode(await ctx.adapter.lifecycle.get(h), 'not_found', 'get(never created)');
    });

    check(ctx, '7. destroy is idempotent; after destroy get is not_found', async () => {
      const a = ctx.adapter;
      unwrap(await a.lifecycle.destroy(a.buildHandle(ctx.name())), 'destroy(never created)');
      const h = await ctx.created();
      unwrap(await a.lifecycle.destroy(h), 'destroy');
      expectCode(await a.lifecycle.get(h), 'not_found', 'get after destroy');
      unwrap(await a.lifecycle.destroy(h), 'destroy again');
    });

    check(ctx, '8. list_all_names contains a created name (or refuses with truncated)', async () => {
      const h = await ctx.sandbox();
      const res = await ctx.adapter.lifecycle.listAllNames();
      if (!res.ok) {
        expectCode(res, 'truncated', 'list_all_names');
        return;
      }
      assert.ok(Array.isArray(res.value), 'a list of names');
      assert.ok(res.value.includes(h.name), `${h.name} missing from ${inspect(res.value)}`);
    });

    check(ctx, '9. suspend then resume keeps the sandbox and a file written before', async (t) => {
      if (lacks(t, ctx, 'suspend')) return;
      const a = ctx.adapter;
      const h = await ctx.sandbox();
      const dir = ctx.opts.scratchDir ?? SANDBOX_HOME;
      const path = `${dir}/conformance/nested/keep-${h.name}.txt`;
      const payload = utf8(`kept across suspend ${h.name}\n`);
      unwrap(await a.files.writeFile(h, path, payload), 'write_file (creates parent directories)');
      unwrap(await a.lifecycle.suspend!(h), 'suspend');
      const resumed = unwrap(await a.lifecycle.resume!(h), 'resume');
      assert.equal(resumed.name, h.name);
      assert.equal(resumed.provider, a.provider);
      unwrap(await a.lifecycle.get(resumed), 'get(resumed handle)');
      if (ctx.opts.readFile) {
        const back = await ctx.opts.readFile(resumed, path);
        assert.ok(back, `${path} is gone after resume`);
        assert.equal(text(back), text(payload));
      }
      // An overwrite after resume still works, with a mode.
      unwrap(await a.files.writeFile(resumed, path, utf8('second\n'), { mode: 0o600 }), 'write_file after resume');
      if (ctx.opts.readFile)
        assert.equal(text((await ctx.opts.readFile(resumed, path)) ?? new Uint8Array()), 'second\n');
    });
  });
};
