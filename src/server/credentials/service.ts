/**
 * Model credentials per account: set (optionally validated against the provider), list without
 * values, remove, and open the one a runtime launch needs. Values stay in a Private box in memory.
 */
import { Private } from '../../sandbox/private.ts';
import type { Runtime } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { deliveryFor, type Delivery, type OpenedCredential } from './delivery.ts';
import { CREDENTIAL_API, credentialsFor, missingCredentialMessage, type CredentialProvider } from './providers.ts';
import { open, seal } from './sealing.ts';
import { deleteCredential, listCredentials, upsertCredential, type CredentialRow } from './store.ts';
import { validateCredential, type Validation } from './validate.ts';

export interface CredentialView {
  readonly provider: CredentialProvider;
  readonly base_url: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export type LaunchDelivery =
  | { readonly ok: true; readonly delivery: Delivery; readonly provider: CredentialProvider | null }
  | {
      readonly ok: false;
      readonly code: 'inference_credential_missing' | 'inference_credential_unreadable';
      readonly message: string;
    };

/** Gateway delivery: where the sandbox reaches the gateway for each model API, and the conversation's sandbox token. */
export interface GatewayVia {
  baseUrl(api: 'anthropic' | 'openai' | 'gemini'): string;
  readonly token: string;
}

/** What the engine asks for at every launch. */
export interface LaunchCredentials {
  forLaunch(accountId: string, runtime: Runtime, model: string, via?: GatewayVia | null): Promise<LaunchDelivery>;
}

const aad = (accountId: string, provider: CredentialProvider) => `${accountId}:${provider}`;

const view = (r: CredentialRow): CredentialView => ({
  provider: r.provider,
  base_url: r.baseUrl,
  created_at: r.createdAt.toISOString(),
  updated_at: r.updatedAt.toISOString(),
});

export class CredentialService implements LaunchCredentials {
  constructor(
    private readonly db: EngineDb,
    private readonly key: Private<Buffer>,
    private readonly validator: typeof validateCredential = validateCredential,
  ) {}

  async set(
    accountId: string,
    provider: CredentialProvider,
    value: Private<string>,
    opts: { baseUrl: string | null; validate: boolean },
  ): Promise<{ ok: true; value: CredentialView } | { ok: false; failure: Exclude<Validation, { ok: true }> }> {
    if (opts.validate) {
      const v = await this.validator(provider, value, opts.baseUrl);
      if (!v.ok) return { ok: false, failure: v };
    }
    const row = await upsertCredential(this.db, {
      accountId,
      provider,
      sealed: seal(this.key, value.reveal(), aad(accountId, provider)),
      baseUrl: opts.baseUrl,
    });
    return { ok: true, value: view(row) };
  }

  async list(accountId: string): Promise<CredentialView[]> {
    return (await listCredentials(this.db, accountId)).map(view);
  }

  remove(accountId: string, provider: CredentialProvider): Promise<boolean> {
    return deleteCredential(this.db, accountId, provider);
  }

  /** The first of `providers` the account has, opened for the model gateway; `unreadable` when sealed with another key. */
  async open(
    accountId: string,
    providers: readonly CredentialProvider[],
  ): Promise<OpenedCredential | 'unreadable' | null> {
    const rows = await listCredentials(this.db, accountId);
    for (const provider of providers) {
      const row = rows.find((r) => r.provider === provider);
      if (!row) continue;
      const plain = open(this.key, row.sealed, aad(accountId, provider));
      return plain === null ? 'unreadable' : { provider, value: new Private(plain), baseUrl: row.baseUrl };
    }
    return null;
  }

  /**
   * Under gateway delivery (`via`), the runtime is set up for the credential the account has, but with
   * the gateway's URL as its base and the sandbox token as its key: the real value never leaves the server.
   */
  async forLaunch(
    accountId: string,
    runtime: Runtime,
    model: string,
    via?: GatewayVia | null,
  ): Promise<LaunchDelivery> {
    const needed = credentialsFor(runtime, model);
    if (needed.length === 0) return { ok: true, delivery: deliveryFor(runtime, model, null), provider: null };
    const rows = await listCredentials(this.db, accountId);
    for (const provider of needed) {
      const row = rows.find((r) => r.provider === provider);
      if (!row) continue;
      const plain = open(this.key, row.sealed, aad(accountId, provider));
      if (plain === null) {
        return {
          ok: false,
          code: 'inference_credential_unreadable',
          message: `the stored ${provider} cannot be opened with this server's secret key (FOUNTAIN_SECRET_KEY changed?): set it again on the Model credentials page (/account/credentials) or with \`fountain credentials set ${provider}\``,
        };
      }
      const cred: OpenedCredential = via
        ? {
            provider,
            value: new Private(via.token),
            baseUrl: via.baseUrl(CREDENTIAL_API[provider].api),
          }
        : { provider, value: new Private(plain), baseUrl: row.baseUrl };
      return { ok: true, delivery: deliveryFor(runtime, model, cred), provider };
    }
    return {
      ok: false,
      code: 'inference_credential_missing',
      message: missingCredentialMessage(runtime, model, needed),
    };
  }
}
