/**
 * Live smoke of the Sprites adapter against a real account: every contract callback, a suspend
 * with a file that survives, an attach replay, an egress deny and allow. Needs SPRITES_TOKEN; not run in CI.
 */
import { pathToFileURL } from 'node:url';
import type { Command, Handle, SandboxResult, StreamFrame } from '../../src/sandbox/index.ts';
import { SpritesAdapter, spritesOptionsFromEnv } from '../../src/providers/sprites/index.ts';

type Step = { step: string; ok: boolean; detail?: unknown };

const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class Sink {
  frames: StreamFrame[] = [];
  sink = (f: StreamFrame) => void this.frames.push(f);
  out = () => this.frames.map((f) => (f.type === 'stdout' ? text(f.data) : '')).join('');
  end = () => this.frames.find((f) => f.type === 'exit' || f.type === 'error');
  async until(pred: () => boolean, ms: number) {
    const deadline = Date.now() + ms;
    while (!pred() && Date.now() < deadline) await sleep(50);
    return pred();
  }
}

/** Runs every step, never stopping at the first failure; returns the report. */
export async function runSmoke(a: SpritesAdapter, opts: { hibernateWaitMs: number; name: string }): Promise<Step[]> {
  const steps: Step[] = [];
  const record = (step: string, ok: boolean, detail?: unknown) => {
    steps.push({ step, ok, detail });
    process.stderr.write(
      `${ok ? 'ok  ' : 'FAIL'} ${step}${detail === undefined ? '' : ` ${JSON.stringify(detail)}`}\n`,
    );
  };
  const res = <T>(step: string, r: SandboxResult<T>, detail?: (v: T) => unknown) =>
    record(step, r.ok, r.ok ? detail?.(r.value) : r.error);

  const created = await a.lifecycle.create(opts.name);
  res('create', created);
  if (!created.ok) return steps;
  const h: Handle = created.value;
  res('create again adopts', await a.lifecycle.create(opts.name));
  res('get', await a.lifecycle.get(h), (i) => i.status);
  const names = await a.lifecycle.listAllNames();
  record(
    'list_all_names has it',
    names.ok && names.value.includes(opts.name),
    names.ok ? names.value.length : names.error,
  );
  res(
    'write_file',
    await a.files.writeFile(h, '/home/sprite/smoke/memory.txt', Buffer.from('kept\n'), { mode: 0o600 }),
  );
  const e = await a.processes.exec(h, 'sh', ['-c', 'cat $HOME/smoke/memory.txt; echo "$FOO"'], {
    env: [['FOO', 'env-merged']],
  });
  record(
    'exec with env',
    e.ok && text(e.value.output) === 'kept\nenv-merged\n' && e.value.exitCode === 0,
    e.ok ? text(e.value.output) : e.error,
  );
  const f = await a.processes.exec(h, 'sh', ['-c', 'exit 231']);
  record('exec nonzero (one-byte exit)', f.ok && f.value.exitCode === 231, f.ok ? f.value.exitCode : f.error);

  const s1 = new Sink();
  const c1 = await a.processes.spawn(h, 'sh', ['-c', 'echo ready; exec cat'], { owner: s1.sink });
  res('spawn (acknowledged)', c1);
  if (c1.ok) {
    res('write_stdin right after spawn', await a.processes.writeStdin(c1.value, Buffer.from('first-write\n')));
    record('first write echoed', await s1.until(() => s1.out().includes('first-write'), 10_000), s1.out());
    res('close_stdin', await a.processes.closeStdin(c1.value));
    await s1.until(() => !!s1.end(), 10_000);
    record('exit 0 after EOF', s1.end()?.type === 'exit' && (s1.end() as { code: number }).code === 0, s1.end());
    const late = await a.processes.writeStdin(c1.value, Buffer.from('x'));
    record(
      'write_stdin after exit is command_exited',
      !late.ok && late.error.code === 'command_exited',
      late.ok ? 'ok' : late.error,
    );
  }

  const s2 = new Sink();
  const script = 'i=0; while [ $i -lt 3000 ]; do echo "line-$i"; i=$((i+1)); done; exec cat';
  const c2 = await a.processes.spawn(h, 'sh', ['-c', script], { owner: s2.sink, detachable: true });
  res('spawn detachable (30 KB of output)', c2);
  let attached: Command | undefined;
  if (c2.ok) {
    await s2.until(() => s2.out().includes('line-2999\n'), 20_000);
    res('stop_command (detach)', await a.processes.stopCommand(c2.value));
    await sleep(15_000); // past the 10 s default disconnect kill
    const sessions = await a.processes.listSessions(h);
    res('list_sessions after 15 s detached', sessions, (v) =>
      v.map((x) => ({ id: x.id, command: x.command?.slice(0, 40) })),
    );
    const sid = sessions.ok ? sessions.value.find((x) => x.command?.includes('line-'))?.id : undefined;
    if (sid) {
      const s3 = new Sink();
      const at = await a.processes.attach(h, sid, { owner: s3.sink, stdin: true });
      res('attach', at);
      if (at.ok) {
        attached = at.value;
        await s3.until(() => s3.out().includes('line-2999\n'), 20_000);
        record('attach replays from byte zero', s3.out() === s2.out(), { got: s3.out().length, want: s2.out().length });
        res('write_stdin via attach', await a.processes.writeStdin(at.value, Buffer.from('via-attach\n')));
        record('attach tails live output', await s3.until(() => s3.out().includes('via-attach'), 10_000));
      }
      res('terminate_session', await a.processes.terminateSession(h, sid, { timeoutMs: 10_000 }));
      const after = await a.processes.listSessions(h);
      record(
        'session gone after terminate',
        after.ok && !after.value.some((x) => x.id === sid),
        after.ok ? after.value.length : after.error,
      );
    } else record('find detached session', false, sessions.ok ? sessions.value : sessions.error);
  }
  if (attached) await a.processes.stopCommand(attached);

  res('network policy allow []', await a.network.applyNetworkPolicy(h, { allow: [] }));
  const denied = await a.processes.exec(h, 'sh', ['-c', 'getent hosts example.com || exit 9'], { timeoutMs: 20_000 });
  record(
    'egress denied (lookup fails)',
    denied.ok && denied.value.exitCode !== 0,
    denied.ok ? denied.value.exitCode : denied.error,
  );
  res('network policy allow [example.com]', await a.network.applyNetworkPolicy(h, { allow: ['example.com'] }));
  const allowed = await a.processes.exec(h, 'sh', ['-c', 'getent hosts example.com'], { timeoutMs: 20_000 });
  record(
    'egress allowed (lookup works)',
    allowed.ok && allowed.value.exitCode === 0,
    allowed.ok ? allowed.value.exitCode : allowed.error,
  );

  // Issue 19 item 8: killing an exited session answers 410 Gone, which is gone, not an error.
  const quick = await a.processes.spawn(h, 'sh', ['-c', 'echo quick'], { owner: () => undefined, detachable: true });
  if (quick.ok) {
    const qid = (quick.value.private?.reveal() as { sessionId?: string } | undefined)?.sessionId;
    await sleep(3000);
    if (qid)
      res(
        'terminate an exited session (410 Gone) is ok',
        await a.processes.terminateSession(h, qid, { timeoutMs: 5_000 }),
      );
  } else res('spawn a quick session', quick);
  // A shim with an attached replayer: suspend skips replayers and never fails on one session's kill
  // (a failed suspend is degraded to a destroy of the sprite and its disk).
  const keep = new Sink();
  const kc = await a.processes.spawn(h, 'sh', ['-c', 'echo kept-session; exec cat'], {
    owner: keep.sink,
    detachable: true,
  });
  res('spawn a session to suspend over', kc);
  if (kc.ok) {
    await keep.until(() => keep.out().includes('kept-session'), 10_000);
    const kid = (kc.value.private?.reveal() as { sessionId?: string } | undefined)?.sessionId;
    await a.processes.stopCommand(kc.value);
    if (kid) res('attach (starts a replayer)', await a.processes.attach(h, kid, { owner: () => undefined }));
  }
  res('suspend', await a.lifecycle.suspend(h));
  const stillThere = await a.lifecycle.get(h);
  record('the sprite survived suspend', stillThere.ok, stillThere.ok ? stillThere.value.status : stillThere.error);
  const deadline = Date.now() + opts.hibernateWaitMs;
  let status = 'unknown';
  while (Date.now() < deadline) {
    const g = await a.lifecycle.get(h);
    status = g.ok ? g.value.status : g.error.code;
    if (status === 'suspended') break;
    await sleep(2000);
  }
  record('sprite hibernated after suspend', status === 'suspended', status);
  const resumed = await a.lifecycle.resume(h);
  res('resume', resumed);
  if (resumed.ok) {
    const cat = await a.processes.exec(resumed.value, 'sh', ['-c', 'cat "$HOME/smoke/memory.txt"']);
    record(
      'file survived suspend/resume',
      cat.ok && text(cat.value.output) === 'kept\n',
      cat.ok ? text(cat.value.output) : cat.error,
    );
  }
  res('destroy', await a.lifecycle.destroy(h));
  const gone = await a.lifecycle.get(h);
  record(
    'get after destroy is not_found',
    !gone.ok && gone.error.code === 'not_found',
    gone.ok ? gone.value : gone.error,
  );
  return steps;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const env = spritesOptionsFromEnv(process.env);
  if (!env.ok) {
    console.error(env.error.detail);
    process.exit(2);
  }
  if (!env.value.token) {
    console.error('SPRITES_TOKEN is not set: nothing to smoke');
    process.exit(2);
  }
  const name = `fountain-smoke000-${Math.random().toString(16).slice(2, 10)}`;
  const steps = await runSmoke(new SpritesAdapter(env.value), { name, hibernateWaitMs: 120_000 });
  const failed = steps.filter((s) => !s.ok);
  console.log(JSON.stringify({ sprite: name, steps: steps.length, failed: failed.map((s) => s.step) }));
  process.exit(failed.length ? 1 : 0);
}
