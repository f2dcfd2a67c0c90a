/**
 * `fountain webhooks list|add|rm|enable|disable|rotate-secret|deliveries|redeliver`: the account's signed
 * webhook endpoints through the public API. The signing secret is printed once, when it is made.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { data } from './schemas.ts';
import { CliError, action, apiFor, printJson, printTable } from './session.ts';

const webhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.string()),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable(),
    failing_since: z.string().nullable(),
  })
  .loose();

const deliverySchema = z
  .object({
    id: z.string(),
    event_id: z.string(),
    event: z.string(),
    status: z.string(),
    attempts: z.number(),
    created_at: z.string(),
    attempt_log: z.array(
      z.object({ status_code: z.number().nullable(), error: z.string().nullable(), latency_ms: z.number() }).loose(),
    ),
  })
  .loose();

const withSecret = z.object({ data: webhookSchema, secret: z.string() }).loose();

const repeat = (v: string, prev: string[] = []): string[] => [...prev, ...v.split(',').filter(Boolean)];

const state = (w: z.infer<typeof webhookSchema>) =>
  w.enabled
    ? w.failing_since
      ? `failing since ${w.failing_since}`
      : 'enabled'
    : `disabled: ${w.disabled_reason ?? ''}`;

export function register(program: Command): void {
  const hooks = program.command('webhooks').description("manage the account's signed webhooks");

  hooks
    .command('list')
    .description('list the endpoints')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: list } = await apiFor(cmd).request('GET', '/api/webhooks', data(z.array(webhookSchema)));
        if (opts.json) return printJson(list);
        printTable(
          ['ID', 'URL', 'EVENTS', 'STATE'],
          list.map((w) => [w.id, w.url, w.events.join(','), state(w)]),
        );
      }),
    );

  hooks
    .command('add <url>')
    .description('add an endpoint; prints its signing secret once')
    .requiredOption(
      '--event <kind>',
      'conversation.created, turn.ended, permission.requested, conversation.failed or runner.offline; repeatable or comma-separated',
      repeat,
    )
    .option('--json', 'print JSON')
    .action(
      action(async (url: string, opts: { event: string[]; json?: boolean }, cmd: Command) => {
        const r = await apiFor(cmd).request('POST', '/api/webhooks', withSecret, { url, events: opts.event });
        if (opts.json) return printJson(r);
        process.stdout.write(
          `added ${r.data.id} for ${r.data.events.join(', ')}\nsigning secret (shown once; keep it with the receiver): ${r.secret}\n`,
        );
      }),
    );

  for (const [name, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    hooks
      .command(`${name} <id>`)
      .description(enabled ? 'enable an endpoint again (clears its failure notice)' : 'stop deliveries to an endpoint')
      .action(
        action(async (id: string, _opts: unknown, cmd: Command) => {
          const { data: w } = await apiFor(cmd).request(
            'PATCH',
            `/api/webhooks/${encodeURIComponent(id)}`,
            data(webhookSchema),
            {
              enabled,
            },
          );
          process.stdout.write(`${w.id}: ${state(w)}\n`);
        }),
      );
  }

  hooks
    .command('rotate-secret <id>')
    .description('a new signing secret, printed once; the old one stops signing at once')
    .action(
      action(async (id: string, _opts: unknown, cmd: Command) => {
        const r = await apiFor(cmd).request(
          'POST',
          `/api/webhooks/${encodeURIComponent(id)}/rotate-secret`,
          withSecret,
        );
        process.stdout.write(`new signing secret for ${r.data.id}: ${r.secret}\n`);
      }),
    );

  hooks
    .command('rm <id>')
    .description('remove an endpoint and its deliveries')
    .action(
      action(async (id: string, _opts: unknown, cmd: Command) => {
        await apiFor(cmd).request('DELETE', `/api/webhooks/${encodeURIComponent(id)}`, z.undefined());
        process.stdout.write(`removed ${id}\n`);
      }),
    );

  hooks
    .command('deliveries <id>')
    .description('the latest deliveries of an endpoint with their attempts')
    .option('--limit <n>', 'how many (1-500)', '20')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, opts: { limit: string; json?: boolean }, cmd: Command) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new CliError('--limit takes 1 to 500', 2);
        const { data: list } = await apiFor(cmd).request(
          'GET',
          `/api/webhooks/${encodeURIComponent(id)}/deliveries?limit=${limit}`,
          data(z.array(deliverySchema)),
        );
        if (opts.json) return printJson(list);
        printTable(
          ['DELIVERY', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST ANSWER', 'CREATED'],
          list.map((d) => {
            const last = d.attempt_log[d.attempt_log.length - 1];
            return [
              d.id,
              d.event,
              d.status,
              String(d.attempts),
              last
                ? last.status_code !== null
                  ? `${last.status_code} in ${last.latency_ms} ms`
                  : (last.error ?? '')
                : '',
              d.created_at,
            ];
          }),
        );
      }),
    );

  hooks
    .command('redeliver <id> <delivery>')
    .description('send a delivery again')
    .action(
      action(async (id: string, delivery: string, _opts: unknown, cmd: Command) => {
        const { data: d } = await apiFor(cmd).request(
          'POST',
          `/api/webhooks/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(delivery)}/redeliver`,
          data(deliverySchema),
        );
        process.stdout.write(`queued ${d.id} (${d.event} ${d.event_id})\n`);
      }),
    );
}
