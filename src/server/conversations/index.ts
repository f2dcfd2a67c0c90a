/**
 * The conversation engine's public surface. Its wiring (registry, placement, config) is the
 * composition root's (server/start.ts); nothing here knows a provider.
 */

export { ConversationEngine } from './engine.ts';
export type { CreateConversationInput, EngineDeps } from './engine.ts';
export type { RunnerDirectory } from '../runners/placement.ts';
export { ENGINE_DEFAULTS, engineConfigFromEnv, type EngineConfig } from './config.ts';
export {
  ENGINE_ERROR_STATUS,
  ENGINE_RETRY_AFTER,
  type EngineError,
  type EngineErrorCode,
  type EngineResult,
} from '../core/engine-errors.ts';
export { conversationTag, taggedArgv } from './agent-process.ts';
export { RUNTIME_SPECS, modelProblem } from '../runtimes/table.ts';
export type { ConversationView, EventView, TurnView } from './views.ts';
