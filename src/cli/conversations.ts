/**
 * `fountain conversations list|show|terminate`: read and end conversations.
 * `show` prints the conversation, its turns and its transcript.
 */
import { inLine } from './queue-words.ts';
import type { Command } from 'commander';
import { z } from 'zod';
import { EventRenderer, usageText } from './render.ts';
import { agentSchema, conversationSchema, data, logEventSchema, turnSchema } from './schemas.ts';
import type { Conversation } from './schemas.ts';
import { action, apiFor, printJson, printTable } from './session.ts';

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
  const conv = program.command('conversations').alias('conv').description('list, show and terminate conversations');

  conv
    .command('list', { isDefault: true })
    .description('list your conversations, newest first (the default)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const api = apiFor(cmd);
        const { data: list } = await api.request('GET', '/api/conversations', data(z.array(conversationSchema)));
        if (opts.json) return printJson(list);
        const { data: agents } = await api.request('GET', '/api/agents', data(z.array(agentSchema)));
        const names = new Map(agents.map((a) => [a.id, a.name]));
        printTable(
          ['ID', 'AGENT', 'STATUS', 'TURNS', 'TITLE', 'SANDBOX'],
          list.map((c) => [
            c.id,
            c.agent_id ? (names.get(c.agent_id) ?? '(deleted)') : '',
            c.queue ? inLine(c.queue.position) : c.status,
            String(c.turn_count ?? ''),
            titleOf(c),
            where(c),
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
    .command('terminate <id>')
    .description('terminate a conversation and destroy its sandbox')
    .action(
      action(async (id: string, _opts: unknown, cmd: Command) => {
        await apiFor(cmd).request('POST', `/api/conversations/${encodeURIComponent(id)}/terminate`, z.unknown());
        process.stdout.write(`terminated ${id}\n`);
      }),
    );
}
