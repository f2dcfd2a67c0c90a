/**
 * The Sprites provider: adapter, configuration and the pieces other modules may need.
 * Nothing here registers itself; the CLI wires the adapter into a ProviderRegistry.
 */
export { SpritesAdapter } from './adapter.ts';
export {
  spritesOptionsFromEnv,
  resolveSpritesConfig,
  DEFAULT_BASE_URL,
  DEFAULT_NAME_PREFIX,
  type SpritesOptions,
} from './config.ts';
