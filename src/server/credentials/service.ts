/**
 * Model credentials per account: set (optionally validated against the provider), list without
 * values, remove, and open the one a runtime launch needs. Values stay in a Private box in memory.
 */
import { Private } from '../../sandbox/private.ts';
import type { CustomRuntime, Runtime } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { customDeliveryFor, deliveryFor, type Delivery, type OpenedCredential } from './delivery.ts';
import { CREDENTIAL_API, credentialsFor, missingCredentialMessage, type CredentialProvider } from './providers.ts';
import { open, seal } from './sealing.ts';
import { keysChanged } from '../core/key-cache-store.ts';
import {
  agentsOfSet,
  credentialsOfSet,
  DEFAULT_SET,
  deleteCredential,
  listCredentials,
  upsertCredential,
  type CredentialRow,
} from './store.ts';
import { validateCredential, type Validation } from './validate.ts';

export { DEFAULT_SET } from './store.ts';

export interface CredentialView {
  readonly provider: CredentialProvider;
  /** The credential set it belongs to (`default` unless named). */
  readonly name: string;
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

/** Which agent is launched: a custom runtime's credentials, and the credential set it uses. */
export interface LaunchAgent {
  readonly custom: CustomRuntime | null;
  readonly credentialSet: string;
}

/** What the engine asks for at every launch. */
export interface LaunchCredentials {
  forLaunch(
    accountId: string,
    runtime: Runtime,
    model: string,
    via?: GatewayVia | null,
    agent?: LaunchAgent | null,
  ): Promise<LaunchDelivery>;
}

/** What a sealed value is bound to: the default set keeps the binding it had before sets existed. */
const aad = (accountId: string, provider: CredentialProvider, name: string) =>
  name === DEFAULT_SET ? `${accountId}:${provider}` : `${accountId}:${provider}:${name}`;

/** Refusing to delete a set's credential that agents still use: their names, in the message. */
export interface InUse {
  readonly agents: ReadonlyArray<{ readonly id: string; readonly name: string }>;
}

const view = (r: CredentialRow): CredentialView => ({
  provider: r.provider,
  name: r.name,
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
    opts: { baseUrl: string | null; validate: boolean; name?: string },
  ): Promise<{ ok: true; value: CredentialView } | { ok: false; failure: Exclude<Validation, { ok: true }> }> {
    if (opts.validate) {
      const v = await this.validator(provider, value, opts.baseUrl);
      if (!v.ok) return { ok: false, failure: v };
    }
    const name = opts.name ?? DEFAULT_SET;
    const row = await upsertCredential(this.db, {
      accountId,
      provider,
      name,
      sealed: seal(this.key, value.reveal(), aad(accountId, provider, name)),
      baseUrl: opts.baseUrl,
    });
    // The model gateway remembers opened credentials briefly (as keys are): every node forgets them now.
    await keysChanged();
    return { ok: true, value: view(row) };
  }

  async list(accountId: string): Promise<CredentialView[]> {
    return (await listCredentials(this.db, accountId)).map(view);
  }

  /**
   * Removes one credential of a set; refused (`in_use`) while agents of the account use that set with a
   * runtime that needs the provider, so no agent is left without its key.
   */
  async remove(
    accountId: string,
    provider: CredentialProvider,
    name: string = DEFAULT_SET,
  ): Promise<'removed' | 'absent' | InUse> {
    const users = (await agentsOfSet(this.db, accountId, name)).filter((a) =>
      credentialsFor(a.runtime, a.model, a.customRuntime).includes(provider),
    );
    const have = (await listCredentials(this.db, accountId)).some((r) => r.provider === provider && r.name === name);
    if (!have) return 'absent';
    if (users.length > 0) return { agents: users.map((a) => ({ id: a.id, name: a.name })) };
    const removed = await deleteCredential(this.db, accountId, provider, name);
    if (removed) await keysChanged();
    return removed ? 'removed' : 'absent';
  }

  /**
   * The first of `providers` the account has in a set, opened for the model gateway; `unreadable` when
   * sealed with another key. Given an agent, the set is the one that agent uses at this moment.
   */
  async open(
    accountId: string,
    providers: readonly CredentialProvider[],
    set: string | { readonly agentId: string | null } = DEFAULT_SET,
  ): Promise<OpenedCredential | 'unreadable' | null> {
    const rows = await credentialsOfSet(this.db, accountId, providers, set);
    for (const provider of providers) {
      const row = rows.find((r) => r.provider === provider);
      if (!row) continue;
      const plain = open(this.key, row.sealed, aad(accountId, provider, row.name));
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
    agent?: LaunchAgent | null,
  ): Promise<LaunchDelivery> {
    const custom = runtime === 'custom' ? (agent?.custom ?? null) : null;
    const needed = credentialsFor(runtime, model, custom);
    if (needed.length === 0)
      return {
        ok: true,
        delivery: custom ? customDeliveryFor(custom, model, []) : deliveryFor(runtime, model, null),
        provider: null,
      };
    const set = agent?.credentialSet ?? DEFAULT_SET;
    const rows = await credentialsOfSet(this.db, accountId, needed, set);
    const opened: OpenedCredential[] = [];
    for (const provider of needed) {
      const row = rows.find((r) => r.provider === provider);
      if (!row) {
        // A custom runtime gets every credential it names; the built-in ones take the first the account has.
        if (custom) return missing(runtime, model, [provider], set);
        continue;
      }
      const plain = open(this.key, row.sealed, aad(accountId, provider, row.name));
      if (plain === null) {
        const named = set === DEFAULT_SET ? '' : ` --name ${set}`;
        return {
          ok: false,
          code: 'inference_credential_unreadable',
          message: `the stored ${provider}${set === DEFAULT_SET ? '' : ` of set ${set}`} cannot be opened with this server's secret key (FOUNTAIN_SECRET_KEY changed?): set it again on the Model credentials page (/account/credentials) or with \`fountain credentials set ${provider}${named}\``,
        };
      }
      opened.push(
        via
          ? { provider, value: new Private(via.token), baseUrl: via.baseUrl(CREDENTIAL_API[provider].api) }
          : { provider, value: new Private(plain), baseUrl: row.baseUrl },
      );
      if (!custom) return { ok: true, delivery: deliveryFor(runtime, model, opened[0]!), provider };
    }
    if (custom)
      return { ok: true, delivery: customDeliveryFor(custom, model, opened), provider: opened[0]?.provider ?? null };
    return missing(runtime, model, needed, set);
  }
}

function missing(runtime: Runtime, model: string, needed: readonly CredentialProvider[], set: string): LaunchDelivery {
  const base = missingCredentialMessage(runtime, model, needed);
  return {
    ok: false,
    code: 'inference_credential_missing',
    message:
      set === DEFAULT_SET
        ? base
        : `${base.replace(/`$/, '')} --name ${set}\` (the agent uses the credential set ${JSON.stringify(set)})`,
  };
}
