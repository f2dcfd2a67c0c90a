/**
 * The "New conversation" form's model field: the picked agent's model, with its runtime's models as
 * suggestions, loaded with the form and again whenever another agent is picked.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { getAgent } from '../../agents/service.ts';
import { RUNTIME_SPECS } from '../../runtimes/table.ts';
import type { Agent } from '../../store/conversation-schema.ts';
import { LoadsWithAgent } from './repository.tsx';
import type { WebDeps, WebEnv } from '../context.ts';

/** Where the model field loads (as the branch pick does): the runtime decides whether there is one. */
export function ModelPickHost() {
  return <LoadsWithAgent id="new-model" from="/conversations/new/model" />;
}

/** The field, or nothing for the demo runtime: it runs no model, so there is none to pick. */
function ModelPick(p: { agent: Agent }) {
  const { runtime, model } = p.agent;
  if (runtime === 'demo') return null;
  const spec = RUNTIME_SPECS[runtime];
  // A custom runtime's table entry names a placeholder, not a model anyone runs.
  const suggestions = [...new Set([model, ...(runtime === 'custom' ? [] : spec.models)])];
  const vendors = spec.modelProviders;
  return (
    <>
      {/* Which agent the field was loaded for: a form sent before it reloaded for another is not mixed up. */}
      <input type="hidden" name="model_agent" value={p.agent.id} />
      <label for="new-model-input">Model</label>
      <input
        id="new-model-input"
        name="model"
        type="text"
        value={model}
        list="new-model-options"
        maxlength={200}
        autocomplete="off"
        spellcheck={false}
        aria-describedby="new-model-hint"
      />
      <datalist id="new-model-options">
        {suggestions.map((m) => (
          <option value={m}></option>
        ))}
      </datalist>
      <p class="small muted" id="new-model-hint">
        The agent's is {model}; another {vendors.length > 0 ? `${vendors.join(' or ')} ` : ''}model here is for this
        conversation only.
      </p>
    </>
  );
}

export function modelPickRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  app.get('/conversations/new/model', async (c) => {
    const user = c.get('user');
    const agentId = z.string().uuid().safeParse(c.req.query('agent_id'));
    const agent = agentId.success ? await getAgent(deps.db, user.account.id, agentId.data) : undefined;
    return c.html(agent ? <ModelPick agent={agent} /> : '');
  });
  return app;
}
