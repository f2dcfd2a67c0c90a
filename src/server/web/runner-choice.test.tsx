import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toHtml } from './live.ts';
import { RUNNER_GONE, RunnerChoice, chosenRunner } from './pages/runner-choice.tsx';

const A = { id: '11111111-1111-4111-8111-111111111111', name: 'laptop', online: true };
const B = { id: '22222222-2222-4222-8222-222222222222', name: 'mac-mini', online: false };

/** The select's options as [value, label, selected]. */
const options = (html: string): [string, string, boolean][] =>
  [...html.matchAll(/<option value="([^"]*)"( selected="")?>([^<]*)<\/option>/g)].map((m) => [
    m[1]!,
    m[3]!.trim(),
    m[2] !== undefined,
  ]);

describe("the agent form's runner select", () => {
  it('offers "any runner" first, selected by default, then each runner by name with its status', async () => {
    const html = await toHtml(<RunnerChoice runners={[A, B]} selected={null} />);
    assert.match(html, /<select id="runner_id" name="runner_id"/);
    assert.deepEqual(options(html), [
      ['', 'Any runner (the most recently connected one online)', true],
      [A.id, 'laptop (online)', false],
      [B.id, 'mac-mini (offline)', false],
    ]);
  });

  it("selects the agent's pinned runner, and shows an error beside the select", async () => {
    const html = await toHtml(<RunnerChoice runners={[A, B]} selected={B.id} error={RUNNER_GONE} />);
    assert.deepEqual(
      options(html).map(([v, , s]) => [v, s]),
      [
        ['', false],
        [A.id, false],
        [B.id, true],
      ],
    );
    assert.match(html, /id="runner_id_error"[^>]*>[^<]*does not exist/);
  });

  it("reads the posted choice: '' is any runner, an id must be one of the account's", () => {
    assert.deepEqual(chosenRunner({}, [A]), { ok: true, id: null });
    assert.deepEqual(chosenRunner({ runner_id: '' }, [A]), { ok: true, id: null });
    assert.deepEqual(chosenRunner({ runner_id: A.id }, [A, B]), { ok: true, id: A.id });
    assert.deepEqual(chosenRunner({ runner_id: B.id }, [A]), { ok: false, error: RUNNER_GONE });
    assert.deepEqual(chosenRunner({ runner_id: 'laptop' }, [A]), { ok: false, error: RUNNER_GONE });
  });
});
