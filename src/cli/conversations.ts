/**
 * `fountain conversations list|show|label|push|terminate|fork|move`: read, label, push, end, fork and move conversations.
 * `show` prints the conversation, its turns and its transcript; `list --label` filters by labels.
 */
import { inLine } from './queue-words.ts';
import type { Command } from 'commander';
import { z } from 'zod';
import { EventRenderer, usageText } from './render.ts';
import { agentSchema, conversationSchema, data, logEventSchema, turnSchema } from './schemas.ts';
import type { Conversation } from './schemas.ts';
import { action, apiFor, CliError, printJson, printTable } from './session.ts';

const pushedSchema = z
  .object({
    repository: z.string(),
    branch: z.string(),
    base: z.string().nullable(),
    commit: z.string(),
    commits: z.number(),
    compare_url: z.string().nullable(),
  })
  .loose();

/** `--turn`: a turn number or a turn id. */
const forkFlags = z.object({
  turn: z
    .union([
      z
        .string()
        .regex(/^[1-9][0-9]{0,8}$/)
        .transform((n) => ({ turn: Number(n) })),
      z
        .string()
        .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i)
        .transform((turn_id) => ({ turn_id })),
    ])
    .optional(),
  json: z.boolean().optional(),
});
const moveFlags = z
  .object({
    runner: z.string().trim().min(1).max(200).optional(),
    provider: z.string().trim().min(1).max(40).optional(),
    json: z.boolean().optional(),
  })
  .refine((f) => f.runner !== undefined || f.provider !== undefined, {
    message: 'give --runner <name> or --provider <name>',
  });

function flags<T>(schema: z.ZodType<T>, raw: unknown, what: string): T {
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new CliError(
    issue?.path[0] === 'turn'
      ? '--turn must be a turn number (1, 2, …) or a turn id'
      : `${what}: ${issue?.message ?? 'invalid flags'}`,
    2,
  );
}

/** The title, or else the first message (most conversations are never given a title), on one short line. */
export const titleOf = (c: Conversation): string => {
  const t = (c.title ?? c.first_prompt ?? '').replace(/\s+/g, ' ').trim();
  return t.length > 48 ? `${t.slice(0, 47)}…` : t;
};

export const where = (c: Conversation): string => {
  const s = c.sandbox;
  if (!s) return '';
  if (s.runner)
    return `on ${s.runner.name}${s.runner.online ? '' : ' (offline)'}${s.runner.path ? ` · ${s.runner.path}` : ''}`;
  return s.provider ?? '';
};

export function register(program: Command): void {
  const conv = program
    .command('conversations')
    .alias('conv')
    .description('list, show, label and terminate conversations');

  conv
    .command('list', { isDefault: true })
    .description('list your conversations, newest first (the default)')
    .option('--label <labels>', 'only those with every label of a comma list (key, or key=value)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean; label?: string }, cmd: Command) => {
        const api = apiFor(cmd);
        // A label filter reads one page (the API's largest) of the matching conversations.
        const path = opts.label
          ? `/api/conversations?${new URLSearchParams({ label: opts.label, limit: '200' })}`
          : '/api/conversations';
        const { data: list } = await api.request('GET', path, data(z.array(conversationSchema)));
        if (opts.json) return printJson(list);
        const { data: agents } = await api.request('GET', '/api/agents', data(z.array(agentSchema)));
        const names = new Map(agents.map((a) => [a.id, a.name]));
        printTable(
          ['ID', 'AGENT', 'STATUS', 'TURNS', 'TITLE', 'SANDBOX', 'LABELS'],
          list.map((c) => [
            c.id,
            c.agent_id ? (names.get(c.agent_id) ?? '(deleted)') : '',
            c.queue ? inLine(c.queue.position) : c.status,
            String(c.turn_count ?? ''),
            titleOf(c),
            where(c),
            (c.labels ?? []).join(','),
          ]),
        );
      }),
    );

  conv
    .command('show <id>')
    .description('show a conversation, its turns and its transcript')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
        const api = apiFor(cmd);
        const { data: c } = await api.request(
          'GET',
          `/api/conversations/${encodeURIComponent(id)}`,
          data(conversationSchema),
        );
        const { data: turns } = await api.request('GET', `/api/conversations/${c.id}/turns`, data(z.array(turnSchema)));
        const events: z.infer<typeof logEventSchema>[] = [];
        for (let after = 0; ; ) {
          const page = await api.request(
            'GET',
            `/api/conversations/${c.id}/events?after=${after}&limit=1000`,
            z.object({
              data: z.array(logEventSchema.extend({ id: z.number() })),
              meta: z.object({ next_cursor: z.number().nullable(), has_more: z.boolean().optional() }).loose(),
            }),
          );
          events.push(...page.data);
          if (!page.meta.has_more || page.meta.next_cursor === null) break;
          after = page.meta.next_cursor;
        }
        if (opts.json) return printJson({ conversation: c, turns, events });
        process.stdout.write(`${c.id}  ${c.queue ? inLine(c.queue.position) : c.status}  ${titleOf(c)}  ${where(c)}\n`);
        if (c.labels?.length) process.stdout.write(`  labels: ${c.labels.join(', ')}\n`);
        const total = usageText(c.usage_total);
        if (total) process.stdout.write(`  ${total}\n`);
        for (const t of turns) {
          const used = usageText(t.usage);
          process.stdout.write(
            `  turn ${t.turn_number}: ${t.queue_position ? inLine(t.queue_position) : t.status}  ${JSON.stringify(t.prompt ?? '')}${used ? `  (${used})` : ''}\n`,
          );
        }
        process.stdout.write('\n');
        const r = new EventRenderer((s) => process.stdout.write(s));
        for (const ev of events) r.render(ev);
        r.newline();
      }),
    );

  conv
    .command('label <id> [labels...]')
    .description('set labels (key or key=value) on a conversation, or remove them with --remove; prints its labels')
    .option('--remove <keys...>', 'label keys to remove')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, labels: string[], opts: { remove?: string[]; json?: boolean }, cmd: Command) => {
        const api = apiFor(cmd);
        const path = `/api/conversations/${encodeURIComponent(id)}/labels`;
        const body = { labels, ...(opts.remove ? { remove: opts.remove } : {}) };
        const r = await api.request('POST', path, data(z.object({ labels: z.array(z.string()) })), body);
        if (opts.json) return printJson(r.data);
        process.stdout.write(r.data.labels.length ? `${r.data.labels.join('\n')}\n` : '(no labels)\n');
      }),
    );

  conv
    .command('push <id>')
    .description("push the sandbox's commits to a new branch of the environment's repository; prints the compare link")
    .option('--branch <name>', 'the new branch (default: fountain/<conversation>-<time>)')
    .option('--repository <url>', "which of the environment's repositories (default: the conversation's)")
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, opts: { branch?: string; repository?: string; json?: boolean }, cmd: Command) => {
        const { data: p } = await apiFor(cmd).request(
          'POST',
          `/api/conversations/${encodeURIComponent(id)}/push`,
          data(pushedSchema),
          {
            ...(opts.branch !== undefined ? { branch: opts.branch } : {}),
            ...(opts.repository !== undefined ? { repository: opts.repository } : {}),
          },
        );
        if (opts.json) return printJson(p);
        const n = p.commits === 1 ? '1 commit' : `${p.commits} commits`;
        process.stdout.write(
          `pushed ${n} to branch ${p.branch} of ${p.repository}\n${p.compare_url ? `compare: ${p.compare_url}\n` : ''}`,
        );
      }),
    );

  conv
    .command('terminate <id>')
    .description('terminate a conversation and destroy its sandbox')
    .action(
      action(async (id: string, _opts: unknown, cmd: Command) => {
        await apiFor(cmd).request('POST', `/api/conversations/${encodeURIComponent(id)}/terminate`, z.unknown());
        process.stdout.write(`terminated ${id}\n`);
      }),
    );

  conv
    .command('fork <id>')
    .description('start a new conversation from the checkpoint after a completed turn (default: the latest)')
    .option('--turn <n|id>', 'the turn to fork after: its number or its id')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, raw: unknown, cmd: Command) => {
        const f = flags(forkFlags, raw, 'fork');
        const { data: c } = await apiFor(cmd).request(
          'POST',
          `/api/conversations/${encodeURIComponent(id)}/fork`,
          data(conversationSchema),
          f.turn ?? {},
        );
        if (f.json) return printJson(c);
        process.stdout.write(`forked ${id} into ${c.id}  ${titleOf(c)}  ${where(c)}\n`);
      }),
    );

  conv
    .command('move <id>')
    .description('move a conversation to another runner (or provider); the next message restores it there')
    .option('--runner <name>', 'the runner to move to, by name or id')
    .option('--provider <name>', 'a sandbox provider to move to instead')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, raw: unknown, cmd: Command) => {
        const f = flags(moveFlags, raw, 'move');
        const body =
          f.runner !== undefined
            ? { runner: f.runner, ...(f.provider ? { provider: f.provider } : {}) }
            : { provider: f.provider };
        const { data: c } = await apiFor(cmd).request(
          'POST',
          `/api/conversations/${encodeURIComponent(id)}/move`,
          data(conversationSchema),
          body,
        );
        if (f.json) return printJson(c);
        process.stdout.write(
          `moved ${id}: ${where(c) || (c.sandbox?.provider ?? '')}; the next message starts it there\n`,
        );
      }),
    );
}
