/**
 * Where a sandbox's home is, on every provider: the agent's HOME and cwd, and the path commands and
 * file operations name. The path is the one Sprites gave it, kept so stored sandboxes and sessions stay valid.
 */
export const SANDBOX_HOME = '/home/sprite';

/**
 * Set by a runner whose sandboxes share one install of each agent adapter version (a directory on the
 * runner's machine); the server's install script installs there once and links it into each sandbox.
 */
export const RUNTIME_STORE_ENV = 'FOUNTAIN_RUNTIME_STORE';
