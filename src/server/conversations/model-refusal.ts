/**
 * Spots the model API refusing the runtime's credential in what an agent reports during a turn, for
 * agents that end such a turn as if it succeeded: codex-acp retries a 401 five times, then says so in
 * an agent message and answers `end_turn`. The turn is failed with these words instead.
 */
import { z } from 'zod';
import { messageUpdateKind } from '../../acp/index.ts';
import { gatewayLimitSentence } from '../runtimes/table.ts';

const CodexError = z.object({
  params: z.object({
    update: z.object({
      sessionUpdate: z.literal('session_info_update'),
      _meta: z.object({
        codex: z.object({
          error: z
            .object({
              message: z.string().optional(),
              codexErrorInfo: z.unknown().optional(),
              additionalDetails: z.string().nullable().optional(),
            })
            .optional(),
          threadStatus: z.object({ type: z.string() }).optional(),
        }),
      }),
    }),
  }),
});

/** Finds an HTTP status in codex's `codexErrorInfo` (`{responseStreamDisconnected: {httpStatusCode}}` and kin). */
function httpStatusOf(info: unknown): number | null {
  if (info === 'unauthorized') return 401;
  if (!info || typeof info !== 'object') return null;
  for (const v of Object.values(info)) {
    if (v && typeof v === 'object' && typeof (v as { httpStatusCode?: unknown }).httpStatusCode === 'number')
      return (v as { httpStatusCode: number }).httpStatusCode;
  }
  return null;
}

/** What one turn has heard so far. */
export class RefusalWatch {
  #refusal: string | null = null;
  #gaveUp = false;

  /** Feeds one parsed ACP message from the agent. */
  observe(message: unknown): void {
    // Every line of a turn passes here; only a session_info_update can match, and a failed zod parse
    // (it builds its issue list) cost more than the rest of a chunk's handling (issue 21).
    if (messageUpdateKind(message) !== 'session_info_update') return;
    const m = CodexError.safeParse(message);
    if (!m.success) return;
    const codex = m.data.params.update._meta.codex;
    const status = codex.error ? httpStatusOf(codex.error.codexErrorInfo) : null;
    if (status === 401 || status === 403) {
      const detail = codex.error?.additionalDetails ?? codex.error?.message ?? `HTTP ${status}`;
      // A 403 of the model gateway over a limit is no credential problem: its sentence is the reason.
      this.#refusal =
        gatewayLimitSentence(detail) ??
        `the model API refused the credential (HTTP ${status}): ${detail.slice(0, 300)}`;
    }
    if (codex.threadStatus?.type === 'systemError') this.#gaveUp = true;
  }

  /** The reason to fail the turn with, once the agent gave up after a refusal; else null. */
  get failure(): string | null {
    return this.#gaveUp ? this.#refusal : null;
  }
}
